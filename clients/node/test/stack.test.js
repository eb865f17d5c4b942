// End to end against the interop stack. Skipped unless TOKENRELAY_STACK_ENV names the stack's
// variables file. The config is TOKENRELAY_CONFIG from that file, else written from RS_URL,
// ISSUER/AS_URL, TOKEN_URL, CLIENT_ID, CLIENT_SECRET (same rules as the Python suite's
// stack_config.py); paths: STACK_PATH (default /whoami), STACK_SSE_PATH (default /events).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Relay, UnknownEnvironment, UnknownProfile, AuthError, TransportError, InvalidParams, NotSupported, InteractionRequired, RelayTimeout } from '../index.js';
import { realBin, stackEnv, logSink, isolatedEnviron, scratchDir } from './helpers.js';

const stack = stackEnv();
const binary = realBin();
const skip = stack === null ? 'TOKENRELAY_STACK_ENV is not set (no interop stack)' : binary === null ? 'tokenrelay binary not built' : false;

function configPath() {
  const s = /** @type {Record<string, string>} */ (stack);
  if (s.TOKENRELAY_CONFIG) return s.TOKENRELAY_CONFIG;
  const client = { type: 'client_credentials', issuer: s.ISSUER || s.AS_URL, client_id: s.CLIENT_ID || 'svc',
    ...(s.TOKEN_URL ? { token_url: s.TOKEN_URL } : {}) };
  const config = {
    version: 1,
    default_environment: 'stack',
    environments: {
      stack: { base_url: s.RS_URL, default_profile: 'service', profiles: {
        service: { ...client, client_secret: s.CLIENT_SECRET || 'svc-secret' },
        bad: { ...client, client_secret: 'definitely-wrong' } } },
      closed: { base_url: 'http://127.0.0.1:9', profiles: { none: { type: 'bearer', token: 'x' } } },
    },
  };
  const dir = scratchDir('tokenrelay-node-');
  // A person's login: device code as the AS's public client `tv` (approve_device.py plays the person).
  if (s.AS_URL) {
    /** @type {Record<string, any>} */ (config.environments.stack.profiles).tv = { type: 'device_code', issuer: client.issuer,
      ...(s.TOKEN_URL ? { token_url: s.TOKEN_URL } : {}),
      device_authorization_url: `${s.AS_URL.replace(/\/$/, '')}/o/device-authorization/`, client_id: 'tv' };
  }
  // Sessions of this config only, not the user's default store (a login here stays here).
  const path = join(dir, 'stack-config.yaml');
  writeFileSync(path, JSON.stringify({ ...config, store: { type: 'sqlite', path: join(dir, 'state', 'sessions.db') } }, null, 2));
  return path;
}

const path = stack?.STACK_PATH || '/whoami';
const ssePath = stack?.STACK_SSE_PATH || '/events';
const start = () => new Relay({ config: configPath(), binary: /** @type {string} */ (binary), environ: isolatedEnviron, onLog: logSink().onLog });

/** @param {any} status */
const renewals = (status) => {
  const session = status.sessions.find((/** @type {any} */ s) => s.environment === 'stack' && s.profile === 'service');
  return (session.counters.acquisitions ?? 0) + (session.counters.renewals ?? 0);
};

test('an authenticated request, 100 at once', { skip }, async () => {
  const relay = start();
  try {
    assert.equal((await relay.request({ path, timeoutMs: 30000 })).status, 200);
    const all = await Promise.all(Array.from({ length: 100 }, () => relay.request({ path, timeoutMs: 60000 })));
    assert.deepEqual(new Set(all.map((r) => r.status)), new Set([200]));
  } finally { await relay.close(); }
});

test('invalidate then a renewal seen in status', { skip }, async () => {
  const relay = start();
  try {
    await relay.request({ path });
    const before = renewals(await relay.status());
    assert.equal(await relay.invalidate({ environment: 'stack', profile: 'service' }), 1);
    await relay.request({ path });
    assert.equal(renewals(await relay.status()), before + 1);
  } finally { await relay.close(); }
});

test('a subscription yields events, then is closed', { skip }, async () => {
  const relay = start();
  try {
    /** @type {string[]} */
    const states = [];
    const sub = relay.subscribe({ path: ssePath, onState: (s) => states.push(s.state) });
    let count = 0;
    for await (const event of sub) { assert.equal(typeof event.data, 'string'); if (++count === 2) break; }
    assert.ok(states.includes('open'));
    assert.deepEqual(await sub.next(), { done: true, value: undefined });
  } finally { await relay.close(); }
});

test('each error class for its cause', { skip }, async () => {
  const relay = start();
  try {
    await assert.rejects(relay.request({ path, environment: 'nope' }), UnknownEnvironment);
    await assert.rejects(relay.request({ path, profile: 'nope' }), UnknownProfile);
    await assert.rejects(relay.request({ path, profile: 'bad' }), (/** @type {any} */ e) => e instanceof AuthError && e.oauthError === 'invalid_client');
    await assert.rejects(relay.request({ path: '/', environment: 'closed', auth: false, timeoutMs: 10000 }), TransportError);
    await assert.rejects(relay.call('request', { path: '/', method: 5 }), InvalidParams);
  } finally { await relay.close(); }
});

test('tokenGet and logout', { skip }, async () => {
  const s = /** @type {Record<string, string>} */ (stack);
  const client = { type: 'client_credentials', issuer: s.ISSUER || s.AS_URL, client_id: s.CLIENT_ID || 'svc',
    client_secret: s.CLIENT_SECRET || 'svc-secret', ...(s.TOKEN_URL ? { token_url: s.TOKEN_URL } : {}) };
  const config = { version: 1, default_environment: 'stack', environments: { stack: { base_url: s.RS_URL,
    default_profile: 'exposed', profiles: { exposed: { ...client, expose_token: true }, hidden: client } } } };
  const file = join(scratchDir('tokenrelay-node-'), 'config.yaml');
  writeFileSync(file, JSON.stringify(config));
  const relay = new Relay({ config: file, binary: /** @type {string} */ (binary), environ: isolatedEnviron, onLog: logSink().onLog });
  try {
    const token = await relay.tokenGet({ environment: 'stack', profile: 'exposed' });
    assert.ok(typeof token.access_token === 'string' && token.access_token.length > 0);
    assert.equal(token.token_type.toLowerCase(), 'bearer');
    await assert.rejects(relay.tokenGet({ profile: 'hidden' }), NotSupported);
    assert.equal(await relay.logout({ environment: 'stack', profile: 'exposed' }), 1);
    const session = (await relay.status()).sessions.find((/** @type {any} */ x) => x.profile === 'exposed');
    assert.equal(session.refreshable, false);
    assert.ok((await relay.tokenGet()).access_token, 'a new token after logout');
  } finally { await relay.close(); }
});

// Logging in as a person (device code at the real AS; approve_device.py plays the person).
const approveDevice = fileURLToPath(new URL('../../neovim/test/approve_device.py', import.meta.url));

/**
 * What the person does with the prompt: signs in at the AS, enters the code, accepts.
 * @param {import('../index.js').AuthPrompt} prompt
 * @returns {Promise<number|null>} the approver's exit code
 */
const approve = (prompt) => new Promise((resolve, reject) => {
  const child = spawn('python3', [approveDevice, /** @type {any} */ (stack).AS_URL, String(prompt.userCode)], { stdio: 'inherit' });
  child.on('error', reject);
  child.on('close', resolve);
});

test('a request before login rejects with InteractionRequired (data.login)', { skip }, async () => {
  const relay = start();
  try {
    const error = await relay.request({ path, profile: 'tv', timeoutMs: 30000 }).then(() => null, (e) => e);
    assert.ok(error instanceof InteractionRequired, String(error));
    assert.equal(error.kind, 'interaction_required');
    assert.equal(error.data.login, true);
  } finally { await relay.close(); }
});

test('a device login: onPrompt and the auth-prompt event, approval, then requests as the person', { skip }, async () => {
  const relay = start();
  try {
    /** @type {import('../index.js').AuthPrompt[]} */
    const events = [];
    relay.on('auth-prompt', (prompt) => events.push(prompt));
    /** @type {Promise<number|null>[]} */
    const approvals = [];
    const result = await relay.login({ environment: 'stack', profile: 'tv', timeoutMs: 120000, onPrompt: (prompt) => approvals.push(approve(prompt)) });
    assert.deepEqual(await Promise.all(approvals), [0]);
    assert.equal(result.loggedIn, true);
    assert.equal(result.profile, 'tv');
    assert.equal(events.length, 1);
    const [prompt] = events;
    assert.equal(prompt.kind, 'device');
    assert.deepEqual([prompt.environment, prompt.profile], ['stack', 'tv']);
    assert.ok(prompt.url.startsWith(/** @type {any} */ (stack).AS_URL), prompt.url);
    assert.ok(prompt.userCode && prompt.expiresAt);
    const response = await relay.request({ path, profile: 'tv', timeoutMs: 30000 });
    assert.equal(response.status, 200);
    assert.equal(response.json().username, 'alice');
    assert.equal(response.json().client_id, 'tv');
  } finally { await relay.close(); }
});

test('login past timeoutMs rejects with RelayTimeout and the process keeps serving', { skip }, async () => {
  const relay = start();
  try {
    const error = await relay.login({ profile: 'tv', timeoutMs: 500 }).then(() => null, (e) => e);
    assert.ok(error instanceof RelayTimeout, String(error));
    await relay.ping({ timeoutMs: 10000 });
  } finally { await relay.close(); }
});

// End to end against the interop stack. Skipped unless TOKENRELAY_STACK_ENV names the stack's
// variables file. The config is TOKENRELAY_CONFIG from that file, else written from RS_URL,
// ISSUER/AS_URL, TOKEN_URL, CLIENT_ID, CLIENT_SECRET (same rules as the Python suite's
// stack_config.py); paths: STACK_PATH (default /whoami), STACK_SSE_PATH (default /events).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Relay, UnknownEnvironment, UnknownProfile, AuthError, TransportError, InvalidParams, NotSupported } from '../index.js';
import { realBin, stackEnv, logSink } from './helpers.js';

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
  const path = join(mkdtempSync(join(tmpdir(), 'tokenrelay-node-')), 'stack-config.yaml');
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
}

const path = stack?.STACK_PATH || '/whoami';
const ssePath = stack?.STACK_SSE_PATH || '/events';
const start = () => new Relay({ config: configPath(), binary: /** @type {string} */ (binary), onLog: logSink().onLog });

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
  const file = join(mkdtempSync(join(tmpdir(), 'tokenrelay-node-')), 'config.yaml');
  writeFileSync(file, JSON.stringify(config));
  const relay = new Relay({ config: file, binary: /** @type {string} */ (binary), onLog: logSink().onLog });
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

// The client against the real binary (lifecycle, cancellation and test/wait today).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Relay, RelayClosed, RelayTimeout, Cancelled, AbortError, MethodNotFound, InvalidParams } from '../index.js';
import { realBin, testEnviron, pidExists, logSink } from './helpers.js';

const binary = realBin();
const skip = binary === null ? 'tokenrelay binary not built (swift build) and $TOKENRELAY_BIN unset' : false;
/** @param {object} [options] */
const start = (options = {}) => new Relay({ binary: /** @type {string} */ (binary), environ: testEnviron, onLog: logSink().onLog, ...options });

test('initialize and ping', { skip }, async () => {
  const relay = start();
  const info = await relay.initialize({ clientInfo: { name: 'node-test' } });
  assert.equal(info.serverInfo.name, 'tokenrelay');
  await relay.ping();
  await assert.rejects(relay.call('no-such-method'), MethodNotFound);
  await assert.rejects(relay.call('initialize', { processId: 'x' }), (/** @type {any} */ e) => e instanceof InvalidParams && e.diagnostics[0].pointer === '/processId');
  assert.equal(await relay.close(), 0);
});

test('100 concurrent calls', { skip }, async () => {
  const relay = start();
  const results = await Promise.all(Array.from({ length: 100 }, (_, n) => relay.call('test/wait', { ms: 50, echo: n })));
  assert.deepEqual(results.map((r) => r.echo), Array.from({ length: 100 }, (_, n) => n));
  await relay.close();
});

test('a cancelled slow call: the server answers -32800 and keeps serving', { skip }, async () => {
  const relay = start();
  const controller = new AbortController();
  const slow = relay.call('test/wait', { ms: 600000 }, { signal: controller.signal });
  await relay.ping();
  controller.abort();
  await assert.rejects(slow, AbortError);
  // Without a signal, cancelling by id surfaces the server's own -32800 answer.
  const id = relay.nextId;
  const slow2 = relay.call('test/wait', { ms: 600000 });
  relay.notify('$/cancelRequest', { id });
  await assert.rejects(slow2, (/** @type {any} */ e) => e instanceof Cancelled && e.code === -32800);
  assert.deepEqual(await relay.call('test/wait', { ms: 1, echo: 'after' }), { echo: 'after' });
  assert.equal(await relay.close(), 0);
});

test('a client timeout rejects with RelayTimeout and cancels on the server', { skip }, async () => {
  const relay = start();
  await assert.rejects(relay.call('test/wait', { ms: 600000 }, { timeoutMs: 300 }), RelayTimeout);
  await relay.ping();
  // Exit 0 right after shutdown: the abandoned call was cancelled, nothing was left in flight.
  assert.equal(await relay.close(), 0);
});

test('the process is gone after close, even with calls in flight', { skip }, async () => {
  const relay = start();
  const slow = relay.call('test/wait', { ms: 600000 }).then(() => null, (e) => Promise.reject(e));
  slow.catch(() => {}); // observed below, after close
  await relay.ping();
  const pid = /** @type {number} */ (relay.pid);
  assert.equal(await relay.close({ timeoutMs: 4000 }), 0);
  await assert.rejects(slow, (/** @type {any} */ e) => e instanceof Cancelled || e instanceof RelayClosed);
  assert.ok(!pidExists(pid));
  await assert.rejects(relay.ping(), RelayClosed);
});

test('a killed binary rejects pending and later calls with RelayClosed', { skip }, async () => {
  const relay = start();
  const slow = relay.call('test/wait', { ms: 600000 });
  await relay.ping();
  process.kill(/** @type {number} */ (relay.pid), 'SIGKILL');
  await assert.rejects(slow, (/** @type {any} */ e) => e instanceof RelayClosed && e.signal === 'SIGKILL');
  await assert.rejects(relay.ping(), RelayClosed);
  await relay.close();
  assert.ok(!pidExists(/** @type {number} */ (relay.pid)));
});

test('session events: a login is told as login-required with its URL; a wrong paste is refused', { skip }, async () => {
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const folder = mkdtempSync(join(tmpdir(), 'tokenrelay-node-sessions-'));
  try {
    const config = join(folder, 'config.yaml');
    writeFileSync(config, [
      'version: 1', 'store: {type: memory}', 'environments:', '  local:', '    base_url: http://127.0.0.1:9',
      '    profiles:', '      me:', '        type: authorization_code', '        client_id: cli',
      '        authorization_url: http://127.0.0.1:9/authorize', '        token_url: http://127.0.0.1:9/token', '',
    ].join('\n'));
    const relay = start({ config });
    try {
      const sessions = await relay.watchSessions({ profile: 'me' });
      assert.deepEqual(sessions.map((s) => [s.profile, s.state]), [['me', 'none']]);
      const changed = new Promise((resolve) => relay.once('session-changed', resolve));
      const controller = new AbortController();
      const login = relay.login({ profile: 'me', signal: controller.signal }).catch((e) => e);
      const change = /** @type {import('../index.js').SessionChange} */ (await changed);
      assert.equal(change.reason, 'login-required');
      assert.equal(change.needsLogin, true);
      assert.ok(String(change.login?.url).startsWith('http://127.0.0.1:9/authorize?'));
      await assert.rejects(relay.loginComplete({ url: 'http://127.0.0.1:1/cb?code=x&state=y', profile: 'me' }), InvalidParams);
      controller.abort();
      await login;
      await relay.unwatchSessions();
    } finally {
      await relay.close();
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});

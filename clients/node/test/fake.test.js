// The client against the fake server: every method, every error class, subscriptions,
// cancellation, a dead process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Relay, ERRORS_BY_KIND, RelayError, RelayClosed, RelayTimeout, Cancelled, UnknownEnvironment, AbortError } from '../index.js';
import { fakeBin, logSink } from './helpers.js';

/** @param {(relay: Relay, sink: ReturnType<typeof logSink>) => Promise<void>} body @param {object} [options] */
async function withRelay(body, options = {}) {
  const sink = logSink();
  const relay = new Relay({ binary: fakeBin, onLog: sink.onLog, ...options });
  try { await body(relay, sink); } finally { await relay.close(); }
}

test('request resolves to a response carrying the sent params', () => withRelay(async (relay) => {
  const r = await relay.request({ method: 'post', path: '/items/{id}', pathParams: { id: 1 }, json: { a: [1, 2] },
    query: { q: 'x' }, headers: { 'X-T': '1' }, environment: 'staging', timeoutMs: 2000 });
  assert.equal(r.status, 200);
  assert.deepEqual(r.headers['set-cookie'], ['a=1', 'b=2']);
  assert.deepEqual(r.json().params, { method: 'POST', path: '/items/{id}', pathParams: { id: 1 }, json: { a: [1, 2] },
    query: { q: 'x' }, headers: { 'X-T': '1' }, environment: 'staging', timeoutMs: 2000 });
  assert.equal(r.elapsedMs, 1.5);
  assert.equal((await relay.request({ path: '/text' })).text, 'héllo');
  assert.deepEqual([...(await relay.request({ path: '/bytes' })).body], [0, 1, 2, 255]);
  assert.equal((await relay.request({ path: '/missing' })).status, 404);
}));

test('invalidate, status, initialize, ping', () => withRelay(async (relay) => {
  assert.equal((await relay.initialize()).serverInfo.name, 'tokenrelay');
  await relay.ping();
  assert.equal(await relay.invalidate({ environment: 'staging', profile: 'svc' }), 1);
  assert.equal(await relay.invalidate({ all: true }), 3);
  assert.equal((await relay.status()).sessions[0].state, 'valid');
}));

test('each error kind rejects with its class', () => withRelay(async (relay) => {
  for (const [kind, Class] of Object.entries(ERRORS_BY_KIND)) {
    await assert.rejects(relay.request({ path: `/error/${kind}` }), (/** @type {any} */ e) => {
      assert.equal(e.constructor, Class, kind);
      assert.ok(e instanceof RelayError);
      assert.equal(e.kind, kind);
      if (kind === 'auth') assert.equal(e.oauthError, 'invalid_client');
      if (kind === 'invalid_params') assert.equal(e.diagnostics[0].pointer, '/method');
      return true;
    });
  }
}));

test('100 concurrent requests share one process', () => withRelay(async (relay) => {
  const results = await Promise.all(Array.from({ length: 100 }, (_, n) => relay.request({ path: `/n/${n}` })));
  assert.deepEqual(results.map((r) => r.json().params.path), Array.from({ length: 100 }, (_, n) => `/n/${n}`));
}));

test('abort and client timeout send $/cancelRequest', () => withRelay(async (relay) => {
  const controller = new AbortController();
  const slow = relay.request({ path: '/slow', signal: controller.signal });
  await relay.ping();
  controller.abort();
  await assert.rejects(slow, (/** @type {any} */ e) => e instanceof AbortError && e.name === 'AbortError' && e instanceof Cancelled);
  await assert.rejects(relay.call('request', { path: '/slow' }, { timeoutMs: 200 }), RelayTimeout);
  await assert.rejects(relay.ping({ signal: AbortSignal.abort() }), AbortError);
  const received = await relay.call('fake/received');
  const cancels = received.filter((/** @type {any} */ m) => m.method === '$/cancelRequest').map((/** @type {any} */ m) => m.params.id);
  const slows = received.filter((/** @type {any} */ m) => m.method === 'request').map((/** @type {any} */ m) => m.id);
  assert.deepEqual(cancels, slows);
  assert.equal(slows.length, 2);
}));

test('a subscription yields events and states, then ends', () => withRelay(async (relay) => {
  /** @type {string[]} */
  const states = [];
  const sub = relay.subscribe({ path: '/sse/finite', lastEventId: '0', onState: (s) => states.push(s.state) });
  const events = [];
  for await (const event of sub) events.push(event);
  assert.deepEqual(events.slice(0, 2), [{ id: '1', event: 'message', data: 'one' }, { event: 'tick', data: 'two\nlines', retry: 1500 }]);
  assert.equal(JSON.parse(events[2].data).lastEventId, '0');
  assert.deepEqual(states, ['connecting', 'open', 'closed']);
  assert.equal(sub.state?.status, 204);
}));

test('breaking out of the loop unsubscribes', () => withRelay(async (relay) => {
  const sub = relay.subscribe({ path: '/sse' });
  for await (const event of sub) { assert.equal(event.data, 'one'); break; }
  const received = await relay.call('fake/received');
  assert.ok(received.some((/** @type {any} */ m) => m.method === 'unsubscribe' && m.params.subscription === sub.id));
  assert.deepEqual(await sub.next(), { done: true, value: undefined });
}));

test('subscribe errors reject the iteration', () => withRelay(async (relay) => {
  const sub = relay.subscribe({ path: '/error/unknown_environment' });
  await assert.rejects(sub.ready, UnknownEnvironment);
  await assert.rejects(sub.next(), UnknownEnvironment);
}));

test('other notifications reach onNotification; stderr reaches onLog', async () => {
  /** @type {[string, any][]} */
  const seen = [];
  await withRelay(async (relay, sink) => {
    await relay.call('fake/notify', { method: 'auth-failed', params: { kind: 'auth', message: 'm' } });
    await relay.ping();
    assert.deepEqual(seen, [['auth-failed', { kind: 'auth', message: 'm' }]]);
    assert.ok(sink.lines.some(([level, line]) => level === 'warn' && line === 'tokenrelay warn: this is a fake'));
  }, { onNotification: (/** @type {string} */ m, /** @type {any} */ p) => seen.push([m, p]) });
});

test('a dead process rejects pending and later calls and ends subscriptions', () => withRelay(async (relay) => {
  const sub = relay.subscribe({ path: '/sse' });
  await sub.ready;
  await assert.rejects(relay.call('fake/die'), RelayClosed);
  await assert.rejects(relay.ping(), RelayClosed);
  await assert.rejects((async () => { for await (const _ of sub) { /* drain */ } })(), RelayClosed);
}));

test('close after shutdown still exits 0', async () => {
  const relay = new Relay({ binary: fakeBin, onLog: () => {} });
  await relay.call('shutdown');
  await assert.rejects(relay.ping(), { kind: 'shutting_down' });
  assert.equal(await relay.close(), 0);
});

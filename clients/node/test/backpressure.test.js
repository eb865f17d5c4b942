// The client keeps tokenrelay's back-pressure both ways. Reading: a slow consumer leaves at most
// `maxBuffered` events in the client and the client stops reading stdout past that (tokenrelay
// then pauses the HTTP transfer), yet every event arrives, in order (against the interop stack's
// /public/events). Writing: many large requests at once wait for 'drain' instead of piling up
// in stdin's buffer (against the real binary's test/wait).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Relay } from '../index.js';
import { realBin, stackEnv, logSink, testEnviron, isolatedEnviron, scratchDir } from './helpers.js';

const stack = stackEnv();
const binary = realBin();
const noBinary = binary === null ? 'tokenrelay binary not built' : false;
const skipStack = stack === null ? 'TOKENRELAY_STACK_ENV is not set (no interop stack)' : noBinary;

const COUNT = 1500;
const SIZE = 4096; // about 6 MB of event data in all
const BOUND = 16;
const CONSUMER_DELAY_MS = 1; // the slow consumer: the scenario under test, not a wait for an outcome

function publicConfig() {
  const s = /** @type {Record<string, string>} */ (stack);
  const config = { version: 1, default_environment: 'stack',
    environments: { stack: { base_url: s.RS_URL, profiles: { none: { type: 'bearer', token: 'unused' } } } } };
  const path = join(scratchDir('tokenrelay-node-bp-'), 'config.yaml');
  writeFileSync(path, JSON.stringify(config));
  return path;
}

/** Bytes the client holds for the consumer: queued events, unread lines, the stream's buffer. */
function heldBytes(/** @type {Relay} */ relay, /** @type {any} */ subscription) {
  let bytes = relay.child.stdout.readableLength;
  for (const line of relay.backlog) bytes += line.length;
  for (const item of subscription.queue) if (item && item.kind === 'event') bytes += item.value.data.length;
  return bytes;
}

test('a slow consumer keeps the client flat and gets every event in order', { skip: skipStack }, async () => {
  const relay = new Relay({ config: publicConfig(), binary: /** @type {string} */ (binary), environ: isolatedEnviron, onLog: logSink().onLog });
  try {
    await relay.ping();
    const subscription = relay.subscribe({ path: '/public/events', query: { count: COUNT, interval: 0, size: SIZE, ping: 0 },
      auth: false, maxBuffered: BOUND });
    const ids = [];
    let maxHeld = 0;
    let maxHeap = 0;
    const heapBefore = process.memoryUsage().heapUsed;
    for await (const event of subscription) {
      ids.push(Number(event.id));
      maxHeld = Math.max(maxHeld, heldBytes(relay, subscription));
      maxHeap = Math.max(maxHeap, process.memoryUsage().heapUsed - heapBefore);
      if (ids.length === COUNT) break;
      await new Promise((resolve) => setTimeout(resolve, CONSUMER_DELAY_MS));
    }
    assert.deepEqual(ids, Array.from({ length: COUNT }, (_, i) => i + 1), 'every event, in order');
    assert.ok(subscription.highWater <= BOUND, `high water ${subscription.highWater}`);
    // Unbounded, the client would hold nearly the whole stream (> 6 MB); bounded, BOUND events
    // plus at most one read chunk.
    assert.ok(maxHeld < 512 * 1024, `client held ${maxHeld} bytes`);
    console.log(`# slow consumer: high water ${subscription.highWater} events, at most ${maxHeld} bytes held, heap growth at most ${maxHeap} bytes`);
    await relay.ping(); // reading resumed after the subscription closed
  } finally { await relay.close(); }
});

test('large concurrent requests wait for drain instead of filling stdin\'s buffer', { skip: noBinary }, async () => {
  const relay = new Relay({ binary: /** @type {string} */ (binary), environ: testEnviron, onLog: logSink().onLog });
  try {
    const stdin = relay.child.stdin;
    const write = stdin.write.bind(stdin);
    let maxBuffered = 0;
    /** @type {any} */ (stdin).write = (/** @type {any[]} */ ...args) => {
      const ok = write(...args);
      maxBuffered = Math.max(maxBuffered, stdin.writableLength);
      return ok;
    };
    const echo = 'x'.repeat(64 * 1024);
    const answers = await Promise.all(Array.from({ length: 200 }, (_, n) =>
      relay.call('test/wait', { ms: 0, echo: `${n}:${echo}` }, { timeoutMs: 120000 })));
    assert.deepEqual(answers.map((a) => a.echo.split(':')[0]), Array.from({ length: 200 }, (_, n) => String(n)));
    // 200 × 64 KiB (13 MB) written at once would sit in stdin's buffer; waiting for 'drain' keeps
    // it to the high-water mark plus one message.
    assert.ok(maxBuffered <= stdin.writableHighWaterMark + 70 * 1024, `stdin buffered ${maxBuffered} bytes`);
    console.log(`# stdin: at most ${maxBuffered} bytes buffered (high-water mark ${stdin.writableHighWaterMark})`);
  } finally { await relay.close(); }
});

test('maxBuffered must be a positive integer', { skip: noBinary }, async () => {
  const relay = new Relay({ binary: /** @type {string} */ (binary), environ: isolatedEnviron, onLog: logSink().onLog });
  try {
    assert.throws(() => relay.subscribe({ path: '/x', maxBuffered: 0 }), RangeError);
  } finally { await relay.close(); }
});

test('close() releases a full subscription nobody reads', { skip: skipStack }, async () => {
  const relay = new Relay({ config: publicConfig(), binary: /** @type {string} */ (binary), environ: isolatedEnviron, onLog: logSink().onLog });
  const subscription = relay.subscribe({ path: '/public/events', query: { count: 2000, interval: 0, ping: 0 }, auth: false, maxBuffered: 4 });
  await new Promise((resolve) => { // the signal: the relay stops reading for this subscription
    const hold = relay.holdReading.bind(relay);
    relay.holdReading = (sub) => { hold(sub); resolve(undefined); };
  });
  assert.equal(subscription.queue.length, 4);
  assert.equal(await relay.close(), 0, 'shutdown was answered and exit decided the code');
  assert.equal(relay.holding.size, 0);
});

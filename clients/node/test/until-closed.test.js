// `untilClosed: true`: a stream the server ends cleanly ends the subscription, so a `for await`
// loop over it finishes after the last event (against the interop stack's /public/events).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Relay } from '../index.js';
import { realBin, stackEnv, logSink, isolatedEnviron, scratchDir } from './helpers.js';

const stack = stackEnv();
const binary = realBin();
const skip = stack === null ? 'TOKENRELAY_STACK_ENV is not set (no interop stack)'
  : binary === null ? 'tokenrelay binary not built' : false;

test('a for-await loop ends when the server ends the stream', { skip }, async () => {
  const s = /** @type {Record<string, string>} */ (stack);
  const config = { version: 1, default_environment: 'stack',
    environments: { stack: { base_url: s.RS_URL, profiles: { none: { type: 'bearer', token: 'unused' } } } } };
  const path = join(scratchDir('tokenrelay-node-uc-'), 'config.yaml');
  writeFileSync(path, JSON.stringify(config));
  const relay = new Relay({ config: path, binary: /** @type {string} */ (binary), environ: isolatedEnviron, onLog: logSink().onLog });
  try {
    /** @type {string[]} */
    const states = [];
    const subscription = relay.subscribe({ path: '/public/events', query: { count: 3, interval: 0, ping: 0 }, auth: false,
      untilClosed: true, onState: (state) => states.push(state.state) });
    const ids = [];
    for await (const event of subscription) ids.push(event.id);
    assert.deepEqual(ids, ['1', '2', '3']);
    assert.equal(states.at(-1), 'closed');
    assert.ok(!states.includes('reconnecting'), states.join(' '));
    assert.equal(subscription.state?.error, undefined);
  } finally { await relay.close(); }
});

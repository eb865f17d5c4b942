import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import * as core from '../lib/core.js';
import * as errors from '../lib/errors.js';
import { repo } from './helpers.js';

test('request params follow the protocol names', () => {
  assert.deepEqual(core.requestParams({ method: 'post', path: '/i/{id}', pathParams: { id: 7 }, query: { a: 1, b: [true, 'x'] },
    headers: { 'X-A': '1' }, json: { n: 1 }, environment: 'e', profile: 'p', timeoutMs: 1500.2, auth: false }),
  { method: 'POST', path: '/i/{id}', pathParams: { id: 7 }, query: { a: 1, b: [true, 'x'] }, headers: { 'X-A': '1' },
    json: { n: 1 }, environment: 'e', profile: 'p', timeoutMs: 1501, auth: false });
});

test('bytes bodies are sent as base64 and defaults are omitted', () => {
  assert.deepEqual(core.requestParams({ url: 'https://h/x', body: Buffer.from([0, 255]) }), { method: 'GET', url: 'https://h/x', base64: 'AP8=' });
  assert.deepEqual(core.requestParams({ path: '/a', json: null }), { method: 'GET', path: '/a', json: null });
});

test('conflicting request options are rejected', () => {
  assert.throws(() => core.requestParams({ path: '/a', json: 1, text: 'x' }), TypeError);
  assert.throws(() => core.requestParams({ path: '/a', url: 'http://h' }), TypeError);
  assert.throws(() => core.requestParams({}), TypeError);
  assert.throws(() => core.requestParams({ path: '/a', timeoutMs: 0 }), RangeError);
});

test('subscribe and invalidate params', () => {
  assert.deepEqual(core.subscribeParams({ path: '/sse', lastEventId: '9' }), { path: '/sse', lastEventId: '9' });
  assert.deepEqual(core.subscribeParams({ path: '/sse', untilClosed: true }), { path: '/sse', untilClosed: true });
  assert.deepEqual(core.invalidateParams(), {});
  assert.deepEqual(core.invalidateParams({ environment: 'e', profile: 'p', all: true }), { environment: 'e', profile: 'p', all: true });
});

test('arguments force NDJSON', () => {
  assert.deepEqual(core.buildArgs({ config: 'c.yaml', env: 'e', logLevel: 'debug', args: ['--x'] }),
    ['serve', '--framing', 'ndjson', '--config', 'c.yaml', '--env', 'e', '--log-level', 'debug', '--x']);
});

test('the binary is found from the option, the environment or PATH', () => {
  assert.equal(core.findBinary('/bin/sh', {}), '/bin/sh');
  assert.equal(core.findBinary(undefined, { TOKENRELAY_BIN: '/bin/sh' }), '/bin/sh');
  assert.equal(core.findBinary('sh', { PATH: '/nonexistent:/bin' }), '/bin/sh');
  assert.throws(() => core.findBinary(undefined, { PATH: '/nonexistent' }), /not found/);
});

test('messages are single lines', () => {
  assert.equal(core.encodeMessage(core.cancelMessage(3)), '{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":3}}\n');
});

test('lines are split whatever the chunking, multi-byte characters included', () => {
  const bytes = Buffer.from('{"a":"é"}\n{"b":2}\n\n{"c":3}\n');
  for (let size = 1; size <= bytes.length; size++) {
    const splitter = new core.LineSplitter();
    const lines = [];
    for (let i = 0; i < bytes.length; i += size) lines.push(...splitter.push(bytes.subarray(i, i + size)));
    assert.deepEqual(lines, ['{"a":"é"}', '{"b":2}', '', '{"c":3}']);
  }
});

test('classify sorts responses, errors and notifications', () => {
  assert.deepEqual(core.classify({ jsonrpc: '2.0', id: 1, result: null }), { type: 'response', id: 1, result: null });
  const e = core.classify({ jsonrpc: '2.0', id: 2, error: { code: -32021, message: 't', data: { kind: 'timeout' } } });
  assert.ok(e.type === 'response' && e.error instanceof errors.RelayTimeout);
  assert.deepEqual(core.classify({ jsonrpc: '2.0', method: 'event', params: { data: 'x' } }), { type: 'notification', method: 'event', params: { data: 'x' } });
  assert.throws(() => core.classify({ jsonrpc: '2.0' }), errors.ProtocolError);
  assert.equal(core.parseLine('[{"id":1,"result":1},{"id":2,"result":2}]').length, 2);
  assert.throws(() => core.parseLine('nope'), errors.ProtocolError);
});

for (const [kind, Class] of Object.entries(errors.ERRORS_BY_KIND)) {
  test(`kind ${kind} maps to ${Class.name}`, () => {
    const error = errors.errorFromJSON({ code: -32000, message: 'm', data: { kind } });
    assert.equal(error.constructor, Class);
    assert.ok(error instanceof errors.RelayError && error instanceof Error);
    assert.equal(error.kind, kind);
    assert.equal(error.name, Class.name);
  });
}

test('every kind in the OpenRPC document has a class', () => {
  const doc = JSON.parse(readFileSync(resolve(repo, 'schemas', 'openrpc.json'), 'utf8'));
  for (const error of Object.values(doc.components.errors)) assert.ok(/** @type {any} */ (error).data.kind in errors.ERRORS_BY_KIND);
});

test('errors fall back to the code, then the base class; auth and invalid_params expose data', () => {
  assert.equal(errors.errorFromJSON({ code: -32010, message: 'm' }).constructor, errors.AuthError);
  const unknown = errors.errorFromJSON({ code: -32099, message: 'm', data: { kind: 'new' } });
  assert.equal(unknown.constructor, errors.RelayError);
  assert.equal(unknown.kind, 'new');
  const auth = /** @type {errors.AuthError} */ (errors.errorFromJSON({ code: -32010, message: 'm', data: { kind: 'auth', oauthError: 'invalid_grant', oauthErrorDescription: 'd' } }));
  assert.equal(auth.oauthError, 'invalid_grant');
  assert.equal(auth.oauthErrorDescription, 'd');
  const bad = /** @type {errors.InvalidParams} */ (errors.errorFromJSON({ code: -32602, message: 'm', data: { kind: 'invalid_params', diagnostics: [{ pointer: '/a', reason: 'r' }] } }));
  assert.deepEqual(bad.diagnostics, [{ pointer: '/a', reason: 'r' }]);
  assert.ok(errors.errorFromJSON('junk') instanceof errors.ProtocolError);
  assert.equal(new errors.AbortError().name, 'AbortError');
  assert.ok(new errors.AbortError() instanceof errors.Cancelled);
});

test('responses expose status, headers and the body in every form', () => {
  const r = new core.Response({ status: 200, headers: { a: 'b' }, json: { n: 1 }, elapsedMs: 5 });
  assert.ok(r.ok);
  assert.deepEqual(r.json(), { n: 1 });
  assert.equal(r.text, '{"n":1}');
  const t = new core.Response({ status: 500, headers: {}, text: '[1]', elapsedMs: 1 });
  assert.ok(!t.ok);
  assert.deepEqual(t.json(), [1]);
  assert.deepEqual([...new core.Response({ status: 200, headers: {}, base64: 'AAEC', elapsedMs: 1 }).body], [0, 1, 2]);
  assert.equal(new core.Response({ status: 204, headers: {}, elapsedMs: 1 }).body.length, 0);
  assert.throws(() => new core.Response({ headers: {} }), errors.ProtocolError);
});

test('events, states and log levels', () => {
  assert.deepEqual(core.eventFromParams({ subscription: 's', data: 'x' }), { event: 'message', data: 'x' });
  assert.deepEqual(core.stateFromParams({ subscription: 's', state: 'reconnecting', attempt: 2, retryInMs: 5, error: { kind: 'transport', message: 'm' } }),
    { state: 'reconnecting', attempt: 2, retryInMs: 5, error: { kind: 'transport', message: 'm' } });
  assert.equal(core.logLevelOf('tokenrelay warn: x'), 'warn');
  assert.equal(core.logLevelOf('{"level":"error"}'), 'error');
  assert.equal(core.logLevelOf('plain'), 'info');
});

test('the code table is exactly the documented one (protocol 2026-12-01 renumbering included)', () => {
  const document = JSON.parse(readFileSync(new URL('../../../schemas/openrpc.json', import.meta.url), 'utf8'));
  for (const [kind, { code }] of Object.entries(document.components.errors)) {
    assert.equal(errors.errorFromJSON({ code, message: 'm' }).kind, kind, `code ${code}`);
  }
  for (const reserved of [-32001, -32002, -32803, -32802, -32801]) {
    assert.equal(errors.errorFromJSON({ code: reserved, message: 'm' }).kind, null, `${reserved} is LSP's`);
  }
});

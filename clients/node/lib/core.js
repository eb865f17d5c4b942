// The pure protocol core: locating the binary, building params and messages, classifying
// incoming messages, response and event objects. No I/O besides stat on PATH entries.

import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join, sep } from 'node:path';
import { ProtocolError, errorFromJSON } from './errors.js';

/**
 * The tokenrelay executable: `binary`, else `$TOKENRELAY_BIN`, else `tokenrelay` on PATH.
 * @param {string|undefined} binary
 * @param {Record<string, string|undefined>} [environ]
 * @returns {string}
 */
export function findBinary(binary, environ = process.env) {
  const candidate = binary || environ.TOKENRELAY_BIN;
  const executable = (/** @type {string} */ path) => {
    try {
      accessSync(path, constants.X_OK);
      return statSync(path).isFile();
    } catch {
      return false;
    }
  };
  const onPath = (/** @type {string} */ name) =>
    (environ.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, name)).find(executable);
  if (candidate) {
    if (candidate.includes(sep)) {
      if (executable(candidate)) return candidate;
      throw new Error(`tokenrelay binary not found or not executable: ${candidate}`);
    }
    const found = onPath(candidate);
    if (found) return found;
    throw new Error(`tokenrelay binary not found on PATH: ${candidate}`);
  }
  const found = onPath('tokenrelay');
  if (found) return found;
  throw new Error('tokenrelay binary not found: pass binary, set $TOKENRELAY_BIN or put it on PATH');
}

/**
 * The argument list (after the executable) for an NDJSON server.
 * @param {{config?: string, env?: string, logLevel?: string, args?: string[]}} options
 * @returns {string[]}
 */
export function buildArgs({ config, env, logLevel, args = [] } = {}) {
  const argv = ['serve', '--framing', 'ndjson'];
  if (config !== undefined) argv.push('--config', String(config));
  if (env !== undefined) argv.push('--env', env);
  if (logLevel !== undefined) argv.push('--log-level', logLevel);
  return argv.concat(args);
}

/** @param {unknown} message */
export function encodeMessage(message) {
  return JSON.stringify(message) + '\n';
}

/** @param {number|string} id @param {string} method @param {object} [params] */
export function requestMessage(id, method, params) {
  return params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params };
}

/** @param {string} method @param {object} [params] */
export function notificationMessage(method, params) {
  return params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params };
}

/** @param {number|string} id */
export function cancelMessage(id) {
  return notificationMessage('$/cancelRequest', { id });
}

/** @param {Record<string, any>} params @param {Record<string, any>} o */
function target(params, o) {
  if (o.path !== undefined && o.url !== undefined) throw new TypeError('pass either path or url, not both');
  if (o.path === undefined && o.url === undefined) throw new TypeError('pass path or url');
  if (o.path !== undefined) params.path = o.path;
  if (o.url !== undefined) params.url = String(o.url);
}

/** @param {Record<string, any>} params @param {Record<string, any>} o */
function common(params, o) {
  if (o.pathParams !== undefined) params.pathParams = o.pathParams;
  if (o.query !== undefined) params.query = o.query;
  if (o.headers !== undefined) params.headers = o.headers;
  if (o.environment !== undefined) params.environment = o.environment;
  if (o.profile !== undefined) params.profile = o.profile;
  if (o.timeoutMs !== undefined) {
    if (!(o.timeoutMs > 0)) throw new RangeError('timeoutMs must be positive');
    params.timeoutMs = Math.ceil(o.timeoutMs);
  }
  if (o.auth === false) params.auth = false;
}

/**
 * The `request` params. At most one of `json`, `text`, `body` (bytes, sent as base64).
 * @param {import('../index.js').RequestOptions} o
 */
export function requestParams(o) {
  const bodies = ['json', 'text', 'body'].filter((k) => /** @type {any} */ (o)[k] !== undefined);
  if (bodies.length > 1) throw new TypeError('pass at most one of json, text, body');
  /** @type {Record<string, any>} */
  const params = { method: (o.method ?? 'GET').toUpperCase() };
  target(params, o);
  common(params, o);
  if (o.json !== undefined) params.json = o.json;
  if (o.text !== undefined) params.text = o.text;
  if (o.body !== undefined) params.base64 = Buffer.from(/** @type {any} */ (o.body)).toString('base64');
  return params;
}

/**
 * The `subscribe` params (GET, no body). `untilClosed`: a stream the server ends cleanly ends
 * the subscription (`closed`) instead of reconnecting.
 * @param {import('../index.js').SubscribeOptions} o
 */
export function subscribeParams(o) {
  /** @type {Record<string, any>} */
  const params = {};
  target(params, o);
  common(params, o);
  if (o.lastEventId !== undefined) params.lastEventId = o.lastEventId;
  if (o.untilClosed) params.untilClosed = true;
  return params;
}

/** @param {{environment?: string, profile?: string, all?: boolean}} o (optional) */
export function invalidateParams({ environment, profile, all } = {}) {
  /** @type {Record<string, any>} */
  const params = {};
  if (environment !== undefined) params.environment = environment;
  if (profile !== undefined) params.profile = profile;
  if (all) params.all = true;
  return params;
}

/** The result of `request`: any HTTP status is a response, not an error. */
export class Response {
  /** @param {Record<string, any>} result */
  constructor(result) {
    if (!result || !Number.isInteger(result.status)) {
      throw new ProtocolError(`request result without a status: ${JSON.stringify(result)}`);
    }
    /** @type {number} */
    this.status = result.status;
    /** @type {Record<string, string|string[]>} lower-case names */
    this.headers = result.headers && typeof result.headers === 'object' ? result.headers : {};
    /** @type {number} milliseconds */
    this.elapsedMs = typeof result.elapsedMs === 'number' ? result.elapsedMs : 0;
    /** The raw result object. */
    this.raw = result;
  }

  /** True for 2xx. */
  get ok() { return this.status >= 200 && this.status < 300; }

  /** The body as a Buffer (JSON bodies re-encoded). */
  get body() {
    if (typeof this.raw.base64 === 'string') return Buffer.from(this.raw.base64, 'base64');
    if (typeof this.raw.text === 'string') return Buffer.from(this.raw.text, 'utf8');
    if ('json' in this.raw) return Buffer.from(JSON.stringify(this.raw.json), 'utf8');
    return Buffer.alloc(0);
  }

  /** The body as text. */
  get text() {
    return typeof this.raw.text === 'string' ? this.raw.text : this.body.toString('utf8');
  }

  /** The parsed JSON body (parses `text` when the server did not). */
  json() {
    return 'json' in this.raw ? this.raw.json : JSON.parse(this.text);
  }
}

/**
 * @param {Record<string, any>} p
 * @returns {import('../index.js').RelayEvent}
 */
export function eventFromParams(p) {
  /** @type {import('../index.js').RelayEvent} */
  const event = { event: typeof p.event === 'string' ? p.event : 'message', data: typeof p.data === 'string' ? p.data : '' };
  if (typeof p.id === 'string') event.id = p.id;
  if (Number.isInteger(p.retry)) event.retry = p.retry;
  return event;
}

/**
 * An `auth-prompt` notification's params, typed (unknown members kept in `raw`).
 * @param {Record<string, any>} p
 * @returns {import('../index.js').AuthPrompt}
 */
export function authPromptFromParams(p) {
  const text = (/** @type {string} */ name) => (typeof p[name] === 'string' ? /** @type {string} */ (p[name]) : undefined);
  /** @type {import('../index.js').AuthPrompt} */
  const prompt = {
    environment: text('environment') ?? '', profile: text('profile') ?? '', kind: text('kind') ?? 'unknown',
    url: text('url') ?? '', raw: { ...p },
  };
  const userCode = text('userCode');
  const complete = text('verificationUriComplete');
  const expiresAt = text('expiresAt');
  if (userCode !== undefined) prompt.userCode = userCode;
  if (complete !== undefined) prompt.verificationUriComplete = complete;
  if (expiresAt !== undefined) prompt.expiresAt = expiresAt;
  return prompt;
}

/**
 * A `session-changed` notification's params as a SessionChange (never a token).
 * @param {Record<string, any>} p
 * @returns {import('../index.js').SessionChange}
 */
export function sessionChangeFromParams(p) {
  const text = (/** @type {string} */ name) => (typeof p[name] === 'string' ? /** @type {string} */ (p[name]) : undefined);
  const reason = text('reason') ?? 'unknown';
  const state = text('state') ?? 'unknown';
  /** @type {import('../index.js').SessionChange} */
  const change = {
    environment: text('environment') ?? '', profile: text('profile') ?? '', state, reason,
    needsLogin: reason === 'login-required' || state === 'interaction_required', raw: { ...p },
  };
  const expiresAt = text('expiresAt');
  if (expiresAt !== undefined) change.expiresAt = expiresAt;
  if (p.login && typeof p.login === 'object') change.login = { ...p.login };
  return change;
}

/**
 * @param {Record<string, any>} p
 * @returns {import('../index.js').SubscriptionState}
 */
export function stateFromParams(p) {
  /** @type {import('../index.js').SubscriptionState} */
  const state = { state: typeof p.state === 'string' ? p.state : 'unknown' };
  for (const key of ['attempt', 'retryInMs', 'status']) if (Number.isInteger(p[key])) /** @type {any} */ (state)[key] = p[key];
  if (p.error && typeof p.error === 'object') state.error = p.error;
  return state;
}

/**
 * Decodes one NDJSON line into its messages (a batch gives several).
 * @param {string} line
 * @returns {unknown[]}
 */
export function parseLine(line) {
  const text = line.trim();
  if (text === '') return [];
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ProtocolError(`server sent a line that is not JSON: ${/** @type {Error} */ (e).message}`);
  }
  return Array.isArray(value) ? value : [value];
}

/**
 * @param {unknown} message
 * @returns {{type: 'response', id: unknown, result?: unknown, error?: import('./errors.js').RelayError}
 *   | {type: 'notification', method: string, params: Record<string, any>}
 *   | {type: 'request', id: unknown, message: Record<string, any>}}
 */
export function classify(message) {
  if (message === null || typeof message !== 'object' || Array.isArray(message)) {
    throw new ProtocolError(`server sent a non-object message: ${JSON.stringify(message)}`);
  }
  const m = /** @type {Record<string, any>} */ (message);
  if (typeof m.method === 'string') {
    if ('id' in m) return { type: 'request', id: m.id, message: m };
    const params = m.params && typeof m.params === 'object' && !Array.isArray(m.params) ? m.params : {};
    return { type: 'notification', method: m.method, params };
  }
  if ('id' in m && 'error' in m) return { type: 'response', id: m.id, error: errorFromJSON(m.error) };
  if ('id' in m && 'result' in m) return { type: 'response', id: m.id, result: m.result };
  throw new ProtocolError(`server sent an unrecognised message: ${JSON.stringify(m)}`);
}

/**
 * Splits a byte stream into lines, chunk-agnostic (UTF-8 decoded per whole line).
 */
export class LineSplitter {
  constructor() {
    /** @type {Buffer[]} */
    this.parts = [];
  }

  /**
   * @param {Buffer} chunk
   * @returns {string[]} complete lines
   */
  push(chunk) {
    const lines = [];
    let start = 0;
    let index;
    while ((index = chunk.indexOf(10, start)) !== -1) {
      this.parts.push(chunk.subarray(start, index));
      lines.push(Buffer.concat(this.parts).toString('utf8'));
      this.parts = [];
      start = index + 1;
    }
    if (start < chunk.length) this.parts.push(chunk.subarray(start));
    return lines;
  }
}

/**
 * The level a server stderr line names (`tokenrelay warn: ...` or JSON with `level`).
 * @param {string} line
 * @returns {'error'|'warn'|'info'|'debug'|'trace'}
 */
export function logLevelOf(line) {
  const levels = ['error', 'warn', 'info', 'debug', 'trace'];
  if (line.startsWith('{')) {
    try {
      const record = JSON.parse(line);
      if (levels.includes(record.level)) return record.level;
    } catch { /* not JSON */ }
    return 'info';
  }
  const head = line.split(':', 1)[0].trim().split(/\s+/).pop()?.toLowerCase() ?? '';
  if (head === 'warning') return 'warn';
  return /** @type {any} */ (levels.includes(head) ? head : 'info');
}

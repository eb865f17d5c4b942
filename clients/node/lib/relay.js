// The client: one tokenrelay process, responses demultiplexed by id, notifications routed to
// subscriptions; many concurrent calls share the process.

import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as core from './core.js';
import { AbortError, ProtocolError, RelayClosed, RelayError, RelayTimeout } from './errors.js';

/** Extra milliseconds the client waits past a request's own `timeoutMs` before giving up. */
export const TIMEOUT_SLACK_MS = 5000;

/**
 * Events (and state changes) a subscription holds for its consumer before the client stops
 * reading the process's output, which makes tokenrelay pause the HTTP transfer.
 */
export const DEFAULT_MAX_BUFFERED = 256;

const END = Symbol('end');

/**
 * An SSE subscription: `for await (const event of subscription)`; breaking out of the loop
 * (or `close()`) unsubscribes. `state` holds the latest subscription-state.
 *
 * At most `maxBuffered` events wait for the consumer; when that many are waiting the client
 * stops reading the process's output until the consumer takes one, so tokenrelay pauses the
 * HTTP transfer instead of the client growing (answers to other calls on the same Relay wait
 * too: consume or close a subscription you no longer read).
 * @implements {AsyncIterableIterator<import('../index.js').RelayEvent>}
 */
export class Subscription {
  /**
   * @param {Relay} relay
   * @param {Record<string, any>} params
   * @param {{onState?: (state: import('../index.js').SubscriptionState) => void, signal?: AbortSignal, maxBuffered?: number}} options
   */
  constructor(relay, params, { onState, signal, maxBuffered = DEFAULT_MAX_BUFFERED } = {}) {
    if (!Number.isInteger(maxBuffered) || maxBuffered < 1) throw new RangeError('maxBuffered must be a positive integer');
    this.relay = relay;
    /** @type {string|undefined} */
    this.id = undefined;
    /** @type {import('../index.js').SubscriptionState|undefined} */
    this.state = undefined;
    this.onState = onState;
    /** @type {any[]} */
    this.queue = [];
    this.maxBuffered = maxBuffered;
    /** The most items that were ever waiting at once (never above `maxBuffered`). */
    this.highWater = 0;
    /** @type {((value: void) => void)|null} */
    this.wake = null;
    this.closed = false;
    /** Resolves with the subscription id once the server registered it (rejects on error). */
    this.ready = relay
      .call('subscribe', params, {
        signal,
        onResult: (result) => {
          const id = result && typeof result === 'object' ? /** @type {any} */ (result).subscription : undefined;
          if (typeof id !== 'string' && typeof id !== 'number') throw new ProtocolError(`unexpected subscribe result: ${JSON.stringify(result)}`);
          this.id = String(id);
          relay.subscriptions.set(this.id, this);
        },
      })
      .then(() => /** @type {string} */ (this.id));
    this.ready.catch(() => {}); // surfaced by next()
    if (signal) signal.addEventListener('abort', () => { this.close().catch(() => {}); }, { once: true });
  }

  /**
   * Queues an item for the consumer; past `maxBuffered` the relay stops reading (back-pressure).
   * @param {any} item
   */
  deliver(item) {
    if (item && item.kind === 'state') this.state = item.value;
    if (this.closed && !(item instanceof RelayError) && item !== END) return; // nobody reads it
    this.queue.push(item);
    if (this.queue.length > this.highWater) this.highWater = this.queue.length;
    if (this.queue.length >= this.maxBuffered) this.relay.holdReading(this);
    if (this.wake) { const wake = this.wake; this.wake = null; wake(); }
  }

  /** @returns {any} the next item, letting the relay read again once there is room */
  take() {
    const item = this.queue.shift();
    if (this.queue.length < this.maxBuffered) this.relay.releaseReading(this);
    return item;
  }

  /** Marks it closed and drops what it holds, so it never holds the relay's reading. */
  markClosed() {
    this.closed = true;
    this.queue = [];
    this.relay.releaseReading(this);
  }

  /** @returns {Promise<IteratorResult<import('../index.js').RelayEvent>>} */
  async next() {
    if (!this.closed) await this.ready;
    for (;;) {
      if (this.closed) return { done: true, value: undefined };
      const item = this.take();
      if (item === undefined) {
        await new Promise((resolve) => { this.wake = resolve; });
        continue;
      }
      if (item === END) return { done: true, value: undefined };
      if (item instanceof RelayError) { this.markClosed(); throw item; }
      if (item.kind === 'event') return { done: false, value: item.value };
      if (item.kind === 'state') {
        if (this.onState) this.onState(item.value);
        if (item.value.state === 'closed') {
          this.markClosed();
          if (this.id !== undefined) this.relay.subscriptions.delete(this.id);
          return { done: true, value: undefined };
        }
      }
    }
  }

  /** Unsubscribes (idempotent; quiet if the process is gone). */
  async close() {
    if (this.closed) return;
    this.markClosed();
    this.deliver(END);
    let id;
    try { id = await this.ready; } catch { return; }
    try {
      await this.relay.call('unsubscribe', { subscription: id }, { timeoutMs: 10000 });
    } catch { /* already closed */ }
    this.relay.subscriptions.delete(id);
  }

  /** Called by `break` in `for await`. */
  async return() {
    await this.close();
    return { done: /** @type {const} */ (true), value: undefined };
  }

  [Symbol.asyncIterator]() { return this; }
}

/** A tokenrelay process and a client for it. */
/**
 * The client. Emits `'auth-prompt'` (an AuthPrompt) whenever a login in progress on this
 * process asks the person to act, whoever started the login, and `'session-changed'` (a
 * SessionChange) at each change of a session after `watchSessions()`.
 */
export class Relay extends EventEmitter {
  /** @param {import('../index.js').RelayOptions} options (optional) */
  constructor({ config, env, binary, args = [], logLevel, environ, onLog, onNotification } = {}) {
    super();
    const executable = core.findBinary(binary, environ ?? process.env);
    this.argv = [executable, ...core.buildArgs({ config, env, logLevel, args })];
    this.onLog = onLog ?? ((/** @type {string} */ line) => console.error(line));
    this.onNotification = onNotification;
    this.nextId = 1;
    /** @type {Map<unknown, {resolve: (v: unknown) => void, reject: (e: Error) => void, onResult?: (v: unknown) => void}>} */
    this.pending = new Map();
    /** @type {Map<string, Subscription>} */
    this.subscriptions = new Map();
    /** @type {RelayClosed|null} */
    this.closedError = null;
    /**
     * Subscriptions whose buffer is full: while any is, stdout is not read.
     * @type {Set<Subscription>}
     */
    this.holding = new Set();
    /**
     * Lines of the last chunk not yet handled because reading is held.
     * @type {string[]}
     */
    this.backlog = [];
    /**
     * Writes in order, each after the previous one drained (stdin back-pressure).
     * @type {Promise<void>}
     */
    this.writeTail = Promise.resolve();
    this.child = spawn(executable, this.argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'], env: environ ?? process.env });
    this.exited = new Promise((resolve) => {
      this.child.on('close', (code, signal) => {
        this.failAll(new RelayClosed(`tokenrelay process exited (${signal ?? `status ${code}`})`, { exitCode: code, signal }));
        resolve(code);
      });
    });
    this.child.on('error', (error) => {
      this.failAll(new RelayClosed(`tokenrelay process could not run: ${error.message}`));
    });
    this.child.stdin.on('error', () => {}); // EPIPE: reported through 'close'
    const out = new core.LineSplitter();
    this.child.stdout.on('data', (chunk) => {
      this.backlog.push(...out.push(chunk));
      this.handleBacklog();
    });
    const err = new core.LineSplitter();
    this.child.stderr.on('data', (chunk) => {
      for (const line of err.push(chunk)) if (line.trim() !== '') this.onLog(line.replace(/\r$/, ''), core.logLevelOf(line));
    });
  }

  /** The process id. */
  get pid() { return this.child.pid; }

  /** Handles buffered lines until a subscription's buffer is full. */
  handleBacklog() {
    while (this.backlog.length > 0 && this.holding.size === 0) {
      this.onLine(/** @type {string} */ (this.backlog.shift()));
    }
  }

  /**
   * Stops reading stdout while `subscription`'s buffer is full: the pipe fills and tokenrelay
   * pauses (it pauses the HTTP transfer).
   * @param {Subscription} subscription
   */
  holdReading(subscription) {
    if (this.holding.size === 0) this.child.stdout.pause();
    this.holding.add(subscription);
  }

  /** @param {Subscription} subscription */
  releaseReading(subscription) {
    if (!this.holding.delete(subscription) || this.holding.size > 0) return;
    // After the current consumer step: handle what was read already, then read on.
    queueMicrotask(() => {
      this.handleBacklog();
      if (this.holding.size === 0 && !this.closedError) this.child.stdout.resume();
    });
  }

  /** @param {string} line */
  onLine(line) {
    let messages;
    try { messages = core.parseLine(line); } catch (e) { this.onLog(String(/** @type {Error} */ (e).message), 'warn'); return; }
    for (const message of messages) {
      let shape;
      try { shape = core.classify(message); } catch (e) { this.onLog(String(/** @type {Error} */ (e).message), 'warn'); continue; }
      if (shape.type === 'response') {
        const entry = this.pending.get(shape.id);
        if (!entry) continue;
        this.pending.delete(shape.id);
        if (shape.error) { entry.reject(shape.error); continue; }
        try {
          if (entry.onResult) entry.onResult(shape.result);
          entry.resolve(shape.result);
        } catch (e) {
          entry.reject(/** @type {Error} */ (e));
        }
      } else if (shape.type === 'notification') {
        if (shape.method === 'event' || shape.method === 'subscription-state') {
          const subscription = this.subscriptions.get(String(shape.params.subscription));
          if (!subscription) continue;
          subscription.deliver(shape.method === 'event'
            ? { kind: 'event', value: core.eventFromParams(shape.params) }
            : { kind: 'state', value: core.stateFromParams(shape.params) });
        } else {
          if (shape.method === 'auth-prompt') this.emitPrompt(core.authPromptFromParams(shape.params));
          if (shape.method === 'session-changed') this.emitChange(core.sessionChangeFromParams(shape.params));
          if (this.onNotification) this.onNotification(shape.method, shape.params);
        }
      }
    }
  }

  /**
   * Emits 'auth-prompt'; a listener that throws is logged, never stops the reading.
   * @param {import('../index.js').AuthPrompt} prompt
   */
  emitPrompt(prompt) {
    try {
      this.emit('auth-prompt', prompt);
    } catch (e) {
      this.onLog(`auth-prompt listener failed: ${String(/** @type {Error} */ (e)?.message ?? e)}`, 'warn');
    }
  }

  /**
   * Emits 'session-changed'; a listener that throws is logged, never stops the reading.
   * @param {import('../index.js').SessionChange} change
   */
  emitChange(change) {
    try {
      this.emit('session-changed', change);
    } catch (e) {
      this.onLog(`session-changed listener failed: ${String(/** @type {Error} */ (e)?.message ?? e)}`, 'warn');
    }
  }

  /** @param {RelayClosed} error */
  failAll(error) {
    if (!this.closedError) this.closedError = error;
    const closed = this.closedError;
    for (const entry of this.pending.values()) entry.reject(closed);
    this.pending.clear();
    for (const subscription of this.subscriptions.values()) subscription.deliver(closed);
    this.subscriptions.clear();
  }

  /**
   * Writes one message after every earlier one, waiting for 'drain' whenever stdin's buffer is
   * full, so a process that reads slowly slows the sender instead of growing the client.
   * @param {unknown} message
   * @returns {Promise<void>}
   */
  send(message) {
    if (this.closedError) return Promise.reject(this.closedError);
    const data = core.encodeMessage(message);
    const written = this.writeTail.then(() => this.write(data));
    this.writeTail = written.catch(() => {});
    return written;
  }

  /** @param {string} data */
  async write(data) {
    if (this.closedError) throw this.closedError;
    const stdin = this.child.stdin;
    if (!stdin.writable) throw new RelayClosed('tokenrelay process is not accepting input');
    if (stdin.write(data)) return;
    await new Promise((resolve) => {
      const done = () => {
        stdin.off('drain', done);
        stdin.off('close', done);
        resolve(undefined);
      };
      stdin.on('drain', done);
      stdin.on('close', done);
    });
  }

  /**
   * Sends a notification (resolves once it is written).
   * @param {string} method @param {object} [params]
   * @returns {Promise<void>}
   */
  notify(method, params) { return this.send(core.notificationMessage(method, params)); }

  /**
   * Sends any request and resolves with its result. `signal` aborting, or no answer within
   * `timeoutMs` (RelayTimeout), sends `$/cancelRequest`.
   * @param {string} method
   * @param {object} [params]
   * @param {{signal?: AbortSignal, timeoutMs?: number, onResult?: (result: unknown) => void}} options (optional)
   * @returns {Promise<any>}
   */
  call(method, params, { signal, timeoutMs, onResult } = {}) {
    return new Promise((resolve, reject) => {
      if (this.closedError) { reject(this.closedError); return; }
      if (signal?.aborted) { reject(new AbortError(undefined, { cause: signal.reason })); return; }
      const id = this.nextId++;
      /** @type {NodeJS.Timeout|undefined} */
      let timer;
      const onAbort = () => {
        this.abandon(id);
        cleanup();
        reject(new AbortError(undefined, { cause: signal?.reason }));
      };
      const cleanup = () => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      this.pending.set(id, {
        resolve: (v) => { cleanup(); resolve(v); },
        reject: (e) => { cleanup(); reject(e); },
        onResult,
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.abandon(id);
          cleanup();
          reject(new RelayTimeout(`no answer to ${method} within ${timeoutMs} ms; cancelled`, { kind: 'timeout' }));
        }, timeoutMs);
      }
      this.send(core.requestMessage(id, method, params)).catch((e) => {
        if (!this.pending.delete(id)) return; // answered or abandoned already
        cleanup();
        reject(e);
      });
    });
  }

  /** @param {number} id */
  abandon(id) {
    if (this.pending.delete(id)) this.send(core.cancelMessage(id)).catch(() => { /* closed */ });
  }

  /** `initialize`: server info, protocol version, environments, capabilities. */
  initialize(params = { processId: process.pid }) { return this.call('initialize', params); }

  /**
   * `ping`.
   * @param {{signal?: AbortSignal, timeoutMs?: number}} [options]
   */
  async ping(options) { await this.call('ping', undefined, options); }

  /**
   * An authenticated HTTP request; any HTTP status resolves to a Response.
   * @param {import('../index.js').RequestOptions} options
   * @returns {Promise<core.Response>}
   */
  async request(options) {
    const params = core.requestParams(options);
    const timeoutMs = options.timeoutMs === undefined ? undefined : options.timeoutMs + TIMEOUT_SLACK_MS;
    return new core.Response(await this.call('request', params, { signal: options.signal, timeoutMs }));
  }

  /**
   * `token-invalidate`: how many sessions were invalidated.
   * @param {{environment?: string, profile?: string, all?: boolean}} [options]
   * @returns {Promise<number>}
   */
  async invalidate(options) {
    const result = await this.call('token-invalidate', core.invalidateParams(options));
    if (!result || !Number.isInteger(result.invalidated)) throw new ProtocolError(`unexpected token-invalidate result: ${JSON.stringify(result)}`);
    return result.invalidated;
  }

  /**
   * `logout`: drops tokens and refresh state (revoking where the server offers it); resolves
   * with how many sessions were logged out.
   * @param {{environment?: string, profile?: string, all?: boolean}} [options]
   * @returns {Promise<number>}
   */
  async logout(options) {
    const result = await this.call('logout', core.invalidateParams(options));
    if (!result || !Number.isInteger(result.loggedOut)) throw new ProtocolError(`unexpected logout result: ${JSON.stringify(result)}`);
    return result.loggedOut;
  }

  /**
   * `login`: starts (or joins) the interactive login of that session; resolves once it is
   * stored with `{environment, profile, loggedIn, expiresAt?, subject?, email?, name?}`.
   * `onPrompt` gets each AuthPrompt of this login (the URL, the device user code). Rejects with
   * InteractionRequired (not finished within the profile's `login_timeout`), AuthError
   * (refused), LimitExceeded (too many failed attempts), Cancelled/AbortError (`signal`), or
   * RelayTimeout past `timeoutMs` (the login is cancelled then).
   * @param {import('../index.js').LoginOptions} options (optional)
   * @returns {Promise<import('../index.js').LoginResult>}
   */
  async login({ environment, profile, onPrompt, timeoutMs, signal } = {}) {
    /** @type {Record<string, string>} */
    const params = {};
    if (environment !== undefined) params.environment = environment;
    if (profile !== undefined) params.profile = profile;
    const listener = onPrompt && ((/** @type {import('../index.js').AuthPrompt} */ prompt) => {
      if ((environment === undefined || prompt.environment === environment) && (profile === undefined || prompt.profile === profile)) onPrompt(prompt);
    });
    if (listener) this.on('auth-prompt', listener);
    try {
      const result = await this.call('login', params, { signal, timeoutMs });
      if (!result || result.loggedIn !== true) throw new ProtocolError('unexpected login result'); // never echo it
      return result;
    } finally {
      if (listener) this.off('auth-prompt', listener);
    }
  }

  /**
   * `token-get`: `{access_token, token_type, expires_at?}`, only for profiles with
   * `expose_token: true` (credential-helper use); rejects with NotSupported otherwise.
   * @param {{environment?: string, profile?: string}} options (optional)
   * @returns {Promise<import('../index.js').AccessToken>}
   */
  async tokenGet({ environment, profile } = {}) {
    /** @type {Record<string, string>} */
    const params = {};
    if (environment !== undefined) params.environment = environment;
    if (profile !== undefined) params.profile = profile;
    const result = await this.call('token-get', params);
    if (!result || typeof result.access_token !== 'string') throw new ProtocolError('unexpected token-get result'); // never echo it
    return result;
  }

  /**
   * `watch-sessions`: resolves with every followed session now (as `status` shows them); then
   * the relay emits `'session-changed'` (a SessionChange) at each change, those other tokenrelay
   * processes on the store make included, until `unwatchSessions()`.
   * @param {{environment?: string, profile?: string}} options (optional)
   * @returns {Promise<Record<string, any>[]>}
   */
  async watchSessions({ environment, profile } = {}) {
    /** @type {Record<string, string>} */
    const params = {};
    if (environment !== undefined) params.environment = environment;
    if (profile !== undefined) params.profile = profile;
    const result = await this.call('watch-sessions', params);
    return Array.isArray(result?.sessions) ? result.sessions : [];
  }

  /** `unwatch-sessions`: no `'session-changed'` after it resolves. */
  async unwatchSessions() { await this.call('unwatch-sessions', {}); }

  /**
   * `login-complete`: hands the login in progress the URL the browser was redirected to (the
   * browser is on another machine); the pending `login()` then resolves.
   * @param {{url: string, environment?: string, profile?: string}} options
   */
  async loginComplete({ url, environment, profile }) {
    /** @type {Record<string, string>} */
    const params = { url };
    if (environment !== undefined) params.environment = environment;
    if (profile !== undefined) params.profile = profile;
    await this.call('login-complete', params);
  }

  /** `status`: sessions and subscriptions (never a token value). */
  status() { return this.call('status', {}); }

  /**
   * Follows an SSE stream. Iterate the result with `for await`.
   * @param {import('../index.js').SubscribeOptions} options
   * @returns {Subscription}
   */
  subscribe(options) {
    return new Subscription(this, core.subscribeParams(options), options);
  }

  /**
   * `shutdown` + `exit`, then SIGTERM, then SIGKILL, each bounded; resolves with the exit code.
   * @param {{timeoutMs?: number}} options (optional)
   * @returns {Promise<number|null>}
   */
  async close({ timeoutMs = 5000 } = {}) {
    const running = this.child.exitCode === null && this.child.signalCode === null && !this.closedError;
    for (const subscription of this.subscriptions.values()) subscription.markClosed(); // none may hold reading now
    if (running) {
      for (const id of [...this.pending.keys()]) this.send(core.cancelMessage(/** @type {number} */ (id))).catch(() => { /* gone */ });
      try { await this.call('shutdown', undefined, { timeoutMs: timeoutMs / 2 }); } catch { /* ShuttingDown or gone */ }
      await this.notify('exit').catch(() => { /* gone */ });
    }
    this.child.stdin.end();
    const waitExit = (/** @type {number} */ ms) => Promise.race([
      this.exited.then(() => true),
      new Promise((resolve) => { const t = setTimeout(() => resolve(false), ms); t.unref(); }),
    ]);
    if (!(await waitExit(timeoutMs / 2))) {
      this.child.kill('SIGTERM');
      if (!(await waitExit(timeoutMs / 2))) {
        this.child.kill('SIGKILL');
        await this.exited;
      }
    }
    this.failAll(new RelayClosed('tokenrelay client is closed', { exitCode: this.child.exitCode, signal: this.child.signalCode }));
    return this.child.exitCode;
  }

  /** `await using relay = new Relay(...)` (where supported). */
  async [Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')]() { await this.close(); }
}

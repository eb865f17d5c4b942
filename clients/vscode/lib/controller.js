// The extension's logic, without the `vscode` module: parsing what the user typed, driving
// one tokenrelay process through clients/node's Relay, and formatting what is shown. The
// `ui` object passed in is the only way out (extension.js adapts it to VS Code; the tests
// record it).
'use strict';

const path = require('node:path');
const { pathToFileURL } = require('node:url');

/** clients/node, reused as is (an ES module, loaded with import()). */
const NODE_CLIENT = path.resolve(__dirname, '..', '..', 'node', 'index.js');

/** @returns {Promise<typeof import('../../node/index.js')>} */
function loadNodeClient() {
  return import(pathToFileURL(NODE_CLIENT).href);
}

/**
 * Parses "[METHOD] PATH|URL [--env=E] [--profile=P] [--no-auth] [BODY]"; BODY is JSON when it
 * starts with { or [, else text. Throws a TypeError with a usage line on bad input.
 * @param {string} input
 * @returns {Record<string, any>} request options for Relay.request
 */
function parseRequestInput(input) {
  let rest = String(input ?? '').trim();
  const take = () => {
    const m = /^(\S+)\s*([\s\S]*)$/.exec(rest);
    if (!m) return undefined;
    rest = m[2];
    return m[1];
  };
  /** @type {Record<string, any>} */
  const options = {};
  let token = take();
  if (token && /^[A-Z]+$/.test(token)) { options.method = token; token = take(); }
  if (!token) throw new TypeError('usage: [METHOD] PATH|URL [--env=E] [--profile=P] [--no-auth] [BODY]');
  if (/^https?:\/\//.test(token)) options.url = token; else options.path = token;
  for (;;) {
    const m = /^(--\S+)\s*([\s\S]*)$/.exec(rest);
    if (!m) break;
    const flag = m[1];
    rest = m[2];
    const kv = /^--(env|profile)=(.+)$/.exec(flag);
    if (kv) options[kv[1] === 'env' ? 'environment' : 'profile'] = kv[2];
    else if (flag === '--no-auth') options.auth = false;
    else throw new TypeError(`unknown option ${flag}`);
  }
  const body = rest.trim();
  if (body !== '') {
    if (/^[[{]/.test(body)) {
      try { options.json = JSON.parse(body); } catch (e) { throw new TypeError(`the body is not valid JSON: ${/** @type {Error} */ (e).message}`); }
    } else {
      options.text = body;
    }
  }
  return options;
}

/**
 * What the response document shows: a status line, the headers, the body.
 * @param {Record<string, any>} options @param {any} response a clients/node Response
 */
function formatResponse(options, response) {
  const lines = [`${options.method ?? 'GET'} ${options.path ?? options.url} -> ${response.status}  (${Math.round(response.elapsedMs)} ms)`];
  for (const name of Object.keys(response.headers).sort()) {
    const value = response.headers[name];
    for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`);
  }
  lines.push('');
  const raw = response.raw;
  if ('json' in raw) lines.push(JSON.stringify(raw.json, null, 2));
  else if (typeof raw.text === 'string') lines.push(raw.text);
  else if (typeof raw.base64 === 'string') lines.push(`(binary body, ${response.body.length} bytes)`);
  return lines.join('\n') + '\n';
}

/** @param {any} status the status result @param {any} [info] the initialize result */
function formatStatus(status, info) {
  const lines = [];
  if (info?.serverInfo) lines.push(`tokenrelay ${info.serverInfo.version} (protocol ${info.protocolVersion})`);
  const row = (/** @type {string[]} */ cells) => cells.map((c, i) => (i < cells.length - 1 ? c.padEnd([12, 12, 20, 10, 22, 8, 9][i]) : c)).join(' ').trimEnd();
  lines.push(row(['ENVIRONMENT', 'PROFILE', 'TYPE', 'STATE', 'EXPIRES', 'REFRESH', 'REQUESTS', 'LAST ERROR']));
  for (const s of status.sessions ?? []) {
    lines.push(row([s.environment, s.profile, s.type, s.state, s.expiresAt ?? '-', s.refreshable ? 'yes' : 'no',
      String(s.counters?.requests ?? 0), s.lastError ? `${s.lastError.kind}: ${s.lastError.message}` : '']));
  }
  lines.push(`subscriptions: ${status.subscriptions ?? 0}`);
  return lines.join('\n') + '\n';
}

/** @param {string} label @param {{id?: string, event: string, data: string}} event */
function formatEvent(label, event) {
  return `[${label}] [${event.id ?? '-'}] ${event.event}: ${event.data}`;
}

/**
 * The message for an auth-prompt notification and the URL to offer.
 * @param {any} prompt {environment, profile, kind, url, userCode?, verificationUriComplete?, expiresAt}
 */
function formatAuthPrompt(prompt) {
  const where = `${prompt.environment ?? '?'}/${prompt.profile ?? '?'}`;
  const url = prompt.verificationUriComplete ?? prompt.url;
  let message = prompt.userCode
    ? `tokenrelay: log in to ${where}: open ${prompt.url} and enter the code ${prompt.userCode}`
    : `tokenrelay: log in to ${where}: open ${prompt.url}`;
  if (prompt.expiresAt) message += ` (before ${prompt.expiresAt})`;
  return { message, url: typeof url === 'string' ? url : undefined };
}

/**
 * @typedef {object} Ui
 * @property {(message: string) => void} info
 * @property {(message: string) => void} error
 * @property {(text: string, title: string) => void|Promise<void>} showDocument
 * @property {{appendLine: (line: string) => void, show?: () => void}} output
 * @property {(url: string) => void|Promise<void>} openExternal
 * @property {(items: string[], placeholder: string) => Promise<string|undefined>} pick
 */

/**
 * @typedef {object} Settings
 * @property {string} [binary] @property {string} [config] @property {string} [environment]
 * @property {string} [logLevel] @property {Record<string, string>} [env] extra process environment
 */

class Controller {
  /** @param {{settings: () => Settings, ui: Ui, load?: typeof loadNodeClient}} options */
  constructor({ settings, ui, load = loadNodeClient }) {
    this.settings = settings;
    this.ui = ui;
    this.load = load;
    /** @type {any} */
    this.relayInstance = null;
    /** @type {Promise<any>|null} */
    this.starting = null;
    /** @type {any} */
    this.info = null;
    /** @type {Set<any>} */
    this.subscriptions = new Set();
    this.inFlight = 0;
    this.subscriptionCount = 0;
    /** @type {string[]} */
    this.log = [];
    /** @type {Set<string>} the logins' prompts already shown */
    this.shownPrompts = new Set();
  }

  /** The Relay, started on first use. */
  async relay() {
    if (this.relayInstance && !this.relayInstance.closedError) return this.relayInstance;
    if (!this.starting) {
      this.starting = (async () => {
        const { Relay } = await this.load();
        const s = this.settings();
        const relay = new Relay({
          binary: s.binary || undefined,
          config: s.config || undefined,
          env: s.environment || undefined,
          logLevel: s.logLevel || undefined,
          environ: { ...process.env, ...(s.env ?? {}) },
          onLog: (/** @type {string} */ line) => { this.log.push(line); if (this.log.length > 200) this.log.shift(); },
          onNotification: (/** @type {string} */ method, /** @type {any} */ params) => this.onNotification(method, params),
        });
        this.info = await relay.initialize({ processId: process.pid, clientInfo: { name: 'tokenrelay-vscode', version: '0.1.0' } });
        // Session changes (other windows' and terminals' included): a session that needs a
        // person is shown as "log in to ENV/PROFILE" (onNotification).
        await relay.watchSessions();
        this.relayInstance = relay;
        return relay;
      })().finally(() => { this.starting = null; });
    }
    return this.starting;
  }

  /**
   * Shows a login's prompt once: an auth-prompt and the session-changed of the same login carry
   * the same URL and code, and the person is asked once.
   * @param {any} prompt an auth-prompt's params: the message, and the URL offered
   */
  showPrompt(prompt) {
    const key = `${prompt.environment}/${prompt.profile} ${prompt.url} ${prompt.userCode ?? ''}`;
    if (this.shownPrompts.has(key)) return;
    this.shownPrompts.add(key);
    if (this.shownPrompts.size > 32) this.shownPrompts.delete(this.shownPrompts.values().next().value);
    const { message, url } = formatAuthPrompt(prompt);
    this.ui.info(message);
    if (url) {
      Promise.resolve(this.ui.pick(['Open in browser', 'Ignore'], message))
        .then((choice) => { if (choice === 'Open in browser') return this.ui.openExternal(url); })
        .catch(() => {});
    }
  }

  /** @param {string} method @param {any} params */
  onNotification(method, params) {
    if (method === 'auth-prompt') {
      this.showPrompt(params);
    } else if (method === 'session-changed') {
      // A session that needs a person: "log in to ENV/PROFILE", with what to open when a login
      // is under way; other changes are not shown.
      if (params.reason !== 'login-required' && params.state !== 'interaction_required') return;
      if (params.login && typeof params.login.url === 'string') {
        this.showPrompt({ ...params.login, environment: params.environment, profile: params.profile });
      } else {
        this.ui.info(`tokenrelay: log in to ${params.environment}/${params.profile} (command tokenrelay: Login)`);
      }
    } else if (method === 'auth-failed') {
      this.ui.error(`tokenrelay: renewal refused for ${params.environment}/${params.profile}: ${params.oauthError ?? params.message ?? params.kind}`);
    }
  }

  /** A short status-bar text: '' before the first use. */
  statusText() {
    if (!this.relayInstance) return '';
    if (this.relayInstance.closedError) return 'tokenrelay: stopped';
    let text = 'tokenrelay';
    if (this.inFlight > 0) text += ` ${this.inFlight} req`;
    if (this.subscriptions.size > 0) text += ` ${this.subscriptions.size} sub`;
    return text;
  }

  /**
   * tokenrelay.request: sends what the user typed and shows the response as a document.
   * @param {string|Record<string, any>} input
   * @param {{signal?: AbortSignal}} [options]
   */
  async request(input, { signal } = {}) {
    const options = typeof input === 'string' ? parseRequestInput(input) : { ...input };
    const relay = await this.relay();
    this.inFlight++;
    try {
      const response = await relay.request({ ...options, signal });
      const text = formatResponse(options, response);
      await this.ui.showDocument(text, 'tokenrelay response');
      return { options, response, text };
    } catch (e) {
      this.ui.error(`tokenrelay: ${options.method ?? 'GET'} ${options.path ?? options.url} failed: ${/** @type {Error} */ (e).message}`);
      throw e;
    } finally {
      this.inFlight--;
    }
  }

  /** tokenrelay.status: the sessions as a document. */
  async status() {
    const relay = await this.relay();
    const status = await relay.status();
    const text = formatStatus(status, this.info);
    await this.ui.showDocument(text, 'tokenrelay status');
    return { status, text };
  }

  /**
   * tokenrelay.subscribe: events go to the output channel until unsubscribeAll() (or the
   * stream ends). Resolves with the subscription once registered.
   * @param {string} input "PATH|URL [--env=E] [--profile=P] [--no-auth]"
   */
  async subscribe(input) {
    const options = parseRequestInput(input);
    if (options.method || options.json !== undefined || options.text !== undefined) throw new TypeError('subscribe takes PATH|URL [--env=E] [--profile=P] [--no-auth]');
    const relay = await this.relay();
    const label = `${++this.subscriptionCount} ${options.path ?? options.url}`;
    const sub = relay.subscribe({
      ...options,
      onState: (/** @type {any} */ s) => this.ui.output.appendLine(`[${label}] -- ${s.state}${s.status ? ` ${s.status}` : ''}${s.error ? ` ${s.error.kind}: ${s.error.message}` : ''}`),
    });
    this.subscriptions.add(sub);
    this.ui.output.show?.();
    await sub.ready;
    (async () => {
      try {
        for await (const event of sub) this.ui.output.appendLine(formatEvent(label, event));
      } catch (e) {
        this.ui.output.appendLine(`[${label}] ended: ${/** @type {Error} */ (e).message}`);
      } finally {
        this.subscriptions.delete(sub);
      }
    })();
    return sub;
  }

  /** tokenrelay.unsubscribe: closes every subscription; resolves with how many. */
  async unsubscribeAll() {
    const subs = [...this.subscriptions];
    await Promise.all(subs.map((s) => s.close()));
    for (const s of subs) this.subscriptions.delete(s);
    return subs.length;
  }

  /**
   * tokenrelay.login: an interactive login; auth-prompt notifications go to the UI meanwhile.
   * @param {{environment?: string, profile?: string}} [session]
   */
  async login({ environment, profile } = {}) {
    const relay = await this.relay();
    /** @type {Record<string, string>} */
    const params = {};
    if (environment) params.environment = environment;
    if (profile) params.profile = profile;
    try {
      const result = await relay.call('login', params);
      this.ui.info(`tokenrelay: logged in to ${environment ?? 'the default environment'}${profile ? `/${profile}` : ''}`);
      return result;
    } catch (e) {
      this.ui.error(`tokenrelay: login failed: ${/** @type {Error} */ (e).message}`);
      throw e;
    }
  }

  /** tokenrelay.invalidate. @param {{environment?: string, profile?: string, all?: boolean}} [session] */
  async invalidate(session = {}) {
    const relay = await this.relay();
    const n = await relay.invalidate(session);
    this.ui.info(`tokenrelay: ${n} session(s) invalidated`);
    return n;
  }

  /** The environments and profiles (for pickers), from initialize. */
  async environments() {
    await this.relay();
    return this.info?.environments ?? [];
  }

  /** Stops the process (shutdown + exit); resolves with its exit code (null if none ran). */
  async dispose() {
    if (this.starting) { try { await this.starting; } catch { /* failed to start */ } }
    const relay = this.relayInstance;
    this.relayInstance = null;
    if (!relay) return null;
    for (const sub of this.subscriptions) sub.close().catch(() => {});
    this.subscriptions.clear();
    return relay.close();
  }
}

module.exports = { Controller, parseRequestInput, formatResponse, formatStatus, formatEvent, formatAuthPrompt, loadNodeClient, NODE_CLIENT };

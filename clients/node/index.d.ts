// Types for the tokenrelay Node client.

export interface RelayOptions {
  /** Config file (`--config`). */
  config?: string;
  /** Default environment (`--env`). */
  env?: string;
  /** The executable; else `$TOKENRELAY_BIN`, else `tokenrelay` on PATH. */
  binary?: string;
  /** Extra command-line arguments. */
  args?: string[];
  /** `error` | `warn` | `info` | `debug` | `trace`. */
  logLevel?: string;
  /** The child's environment (default `process.env`). */
  environ?: Record<string, string | undefined>;
  /** Each stderr line of the server (default `console.error`). */
  onLog?: (line: string, level: 'error' | 'warn' | 'info' | 'debug' | 'trace') => void;
  /** Server notifications other than `event` / `subscription-state` (`auth-prompt`, `auth-failed`, `log`). */
  onNotification?: (method: string, params: Record<string, any>) => void;
}

type QueryValue = string | number | boolean;

interface TargetOptions {
  path?: string;
  url?: string | URL;
  pathParams?: Record<string, unknown>;
  query?: Record<string, QueryValue | QueryValue[]>;
  headers?: Record<string, string>;
  environment?: string;
  profile?: string;
  timeoutMs?: number;
  auth?: boolean;
  signal?: AbortSignal;
}

export interface RequestOptions extends TargetOptions {
  method?: string;
  json?: unknown;
  text?: string;
  /** Bytes, sent as `base64`. */
  body?: Uint8Array | Buffer;
}

export interface SubscribeOptions extends TargetOptions {
  lastEventId?: string;
  /**
   * A stream the server ends cleanly ends the subscription (`closed`, so the iterator finishes)
   * instead of being reconnected; drops and errors still reconnect. Default false.
   */
  untilClosed?: boolean;
  onState?: (state: SubscriptionState) => void;
  /**
   * Events that may wait for the consumer (default `DEFAULT_MAX_BUFFERED`, 256); past it the
   * client stops reading the process's output, so tokenrelay pauses the HTTP transfer.
   */
  maxBuffered?: number;
}

/** A `token-get` result (only for profiles with `expose_token: true`). */
export interface AccessToken {
  access_token: string;
  token_type: string;
  expires_at?: string;
}

/** An `auth-prompt` notification: what the person must do to finish a login. */
export interface AuthPrompt {
  environment: string;
  profile: string;
  /** `browser`: open `url`; `device`: open `url` and enter `userCode` (or open `verificationUriComplete`). */
  kind: 'browser' | 'device' | string;
  url: string;
  userCode?: string;
  verificationUriComplete?: string;
  /** ISO 8601. */
  expiresAt?: string;
  /** The params as received. */
  raw: Record<string, any>;
}

/** A `session-changed` notification (after `watchSessions()`); never a token. */
export interface SessionChange {
  environment: string;
  profile: string;
  /** The session's state after the change, as `status` shows it. */
  state: string;
  reason: 'valid' | 'login-required' | 'logged-in' | 'logged-out' | 'invalidated' | 'refresh-failed' | 'expired' | string;
  /** ISO 8601, when a token is held. */
  expiresAt?: string;
  /** With `login-required` while a login is under way: what the person must do (`url`, `userCode`). */
  login?: Record<string, any>;
  /** Whether to show "log in to ENV/PROFILE". */
  needsLogin: boolean;
  /** The params as received. */
  raw: Record<string, any>;
}

export interface LoginOptions {
  environment?: string;
  profile?: string;
  /** Each `auth-prompt` of this login. */
  onPrompt?: (prompt: AuthPrompt) => void;
  /** Give up (and cancel the login) after this long; the profile's `login_timeout` bounds it too. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** A `login` result. */
export interface LoginResult {
  environment: string;
  profile: string;
  loggedIn: true;
  expiresAt?: string;
  subject?: string;
  email?: string;
  name?: string;
}

export interface RelayEvent {
  id?: string;
  event: string;
  data: string;
  retry?: number;
}

export interface SubscriptionState {
  state: 'connecting' | 'open' | 'reconnecting' | 'closed' | string;
  attempt?: number;
  retryInMs?: number;
  status?: number;
  error?: { kind: string; message: string };
}

export class Response {
  constructor(result: Record<string, any>);
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
  readonly elapsedMs: number;
  readonly raw: Record<string, any>;
  readonly ok: boolean;
  readonly body: Buffer;
  readonly text: string;
  json<T = any>(): T;
}

export class Subscription implements AsyncIterableIterator<RelayEvent> {
  readonly id: string | undefined;
  readonly state: SubscriptionState | undefined;
  readonly ready: Promise<string>;
  readonly maxBuffered: number;
  /** The most events that were ever waiting at once (never above `maxBuffered`). */
  readonly highWater: number;
  next(): Promise<IteratorResult<RelayEvent>>;
  return(): Promise<IteratorResult<RelayEvent>>;
  close(): Promise<void>;
  [Symbol.asyncIterator](): AsyncIterableIterator<RelayEvent>;
}

/**
 * Emits `'auth-prompt'` (AuthPrompt) for any login in progress on its process, and
 * `'session-changed'` (SessionChange) after `watchSessions()`.
 */
export class Relay {
  constructor(options?: RelayOptions);
  on(event: 'auth-prompt', listener: (prompt: AuthPrompt) => void): this;
  off(event: 'auth-prompt', listener: (prompt: AuthPrompt) => void): this;
  once(event: 'auth-prompt', listener: (prompt: AuthPrompt) => void): this;
  on(event: 'session-changed', listener: (change: SessionChange) => void): this;
  off(event: 'session-changed', listener: (change: SessionChange) => void): this;
  once(event: 'session-changed', listener: (change: SessionChange) => void): this;
  readonly pid: number | undefined;
  readonly argv: string[];
  call(method: string, params?: object, options?: { signal?: AbortSignal; timeoutMs?: number }): Promise<any>;
  /** Resolves once written (writes wait for 'drain' when the process reads slowly). */
  notify(method: string, params?: object): Promise<void>;
  initialize(params?: object): Promise<{
    serverInfo: { name: string; version: string };
    protocolVersion: string;
    environments: { name: string; default: boolean; profiles: { name: string; type: string }[] }[];
    capabilities: Record<string, unknown>;
  }>;
  ping(options?: { signal?: AbortSignal; timeoutMs?: number }): Promise<void>;
  request(options: RequestOptions): Promise<Response>;
  invalidate(options?: { environment?: string; profile?: string; all?: boolean }): Promise<number>;
  logout(options?: { environment?: string; profile?: string; all?: boolean }): Promise<number>;
  login(options?: LoginOptions): Promise<LoginResult>;
  tokenGet(options?: { environment?: string; profile?: string }): Promise<AccessToken>;
  status(): Promise<{ sessions: Record<string, any>[]; subscriptions: number }>;
  /** Every followed session now; then `'session-changed'` events until `unwatchSessions()`. */
  watchSessions(options?: { environment?: string; profile?: string }): Promise<Record<string, any>[]>;
  unwatchSessions(): Promise<void>;
  /** Hands the login in progress the URL its browser was redirected to (browser on another machine). */
  loginComplete(options: { url: string; environment?: string; profile?: string }): Promise<void>;
  subscribe(options: SubscribeOptions): Subscription;
  close(options?: { timeoutMs?: number }): Promise<number | null>;
}

export const TIMEOUT_SLACK_MS: number;
export const DEFAULT_MAX_BUFFERED: number;
export function findBinary(binary?: string, environ?: Record<string, string | undefined>): string;
export function errorFromJSON(error: unknown): RelayError;

export class RelayError extends Error {
  constructor(message: string, options?: { code?: number | null; kind?: string | null; data?: Record<string, any>; cause?: unknown });
  readonly code: number | null;
  readonly kind: string | null;
  readonly data: Record<string, any>;
}
export class ConfigError extends RelayError {}
export class UnknownEnvironment extends RelayError {}
export class UnknownProfile extends RelayError {}
export class AuthError extends RelayError {
  readonly oauthError: string | undefined;
  readonly oauthErrorDescription: string | undefined;
}
export class InteractionRequired extends RelayError {}
export class TransportError extends RelayError {}
export class RelayTimeout extends RelayError {}
export class Cancelled extends RelayError {}
export class AbortError extends Cancelled {}
export class LimitExceeded extends RelayError {}
export class ShuttingDown extends RelayError {}
export class NotSupported extends RelayError {}
export class LoggedOut extends RelayError {}
export class StoreError extends RelayError {}
export class InvalidParams extends RelayError {
  readonly diagnostics: { pointer: string; reason: string }[];
}
export class ProtocolError extends RelayError {}
export class MethodNotFound extends ProtocolError {}
export class RelayClosed extends RelayError {
  constructor(message?: string, options?: { exitCode?: number | null; signal?: string | null });
  readonly exitCode: number | null;
  readonly signal: string | null;
}
export const ERRORS_BY_KIND: Record<string, typeof RelayError>;

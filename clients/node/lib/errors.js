// Error classes, one per protocol `data.kind`, all extending RelayError.

/** Base class of every error the client raises. */
export class RelayError extends Error {
  /**
   * @param {string} message
   * @param {{code?: number|null, kind?: string|null, data?: Record<string, unknown>, cause?: unknown}} options (optional)
   */
  constructor(message, { code = null, kind = null, data = {}, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    /** JSON-RPC error code, null for client-side errors. */
    this.code = code;
    /** The stable `data.kind` string. */
    this.kind = kind;
    /** The whole `error.data` object. */
    this.data = data ?? {};
  }
}

/** `config`: the configuration could not be used. */
export class ConfigError extends RelayError {}
/** `unknown_environment`. */
export class UnknownEnvironment extends RelayError {}
/** `unknown_profile`. */
export class UnknownProfile extends RelayError {}
/** `auth`: token acquisition refused; `oauthError`, `oauthErrorDescription` when sent. */
export class AuthError extends RelayError {
  /** @returns {string|undefined} */
  get oauthError() { return typeof this.data.oauthError === 'string' ? this.data.oauthError : undefined; }
  /** @returns {string|undefined} */
  get oauthErrorDescription() {
    return typeof this.data.oauthErrorDescription === 'string' ? this.data.oauthErrorDescription : undefined;
  }
}
/** `interaction_required`: an interactive login is needed. */
export class InteractionRequired extends RelayError {}
/** `transport`: DNS, connection or TLS failure. */
export class TransportError extends RelayError {}
/** `timeout`: the server's bound ran out, or the client gave up waiting (then `$/cancelRequest` was sent). */
export class RelayTimeout extends RelayError {}
/** `cancelled` (-32800). */
export class Cancelled extends RelayError {}
/** The caller's AbortSignal fired: `$/cancelRequest` was sent. `name` is `"AbortError"`. */
export class AbortError extends Cancelled {
  constructor(message = 'The operation was aborted', options = {}) {
    super(message, { kind: 'cancelled', ...options });
    this.name = 'AbortError';
  }
}
/** `limit`: a limit was exceeded (queue, body size). */
export class LimitExceeded extends RelayError {}
/** `shutting_down`: the request arrived after `shutdown`. */
export class ShuttingDown extends RelayError {}
/** `not_supported`. */
export class NotSupported extends RelayError {}
/** `logged_out`: a `logout` ended the session the call was waiting on for a token. */
export class LoggedOut extends RelayError {}
/** `store`: the session store could not be read or written. */
export class StoreError extends RelayError {}
/** `invalid_params` (-32602); `diagnostics` is `[{pointer, reason}]`. */
export class InvalidParams extends RelayError {
  /** @returns {{pointer: string, reason: string}[]} */
  get diagnostics() { return Array.isArray(this.data.diagnostics) ? this.data.diagnostics : []; }
}
/** `parse`, `invalid_request`, `internal`, or a server message the client cannot understand. */
export class ProtocolError extends RelayError {}
/** `method_not_found` (-32601). */
export class MethodNotFound extends ProtocolError {}
/** The process exited or the client was closed; pending calls fail with it at once. */
export class RelayClosed extends RelayError {
  /**
   * @param {string} [message]
   * @param {{exitCode?: number|null, signal?: string|null}} options (optional)
   */
  constructor(message = 'tokenrelay process is closed', { exitCode = null, signal = null } = {}) {
    super(message, { kind: 'closed' });
    this.exitCode = exitCode;
    this.signal = signal;
  }
}

/** @type {Record<string, typeof RelayError>} */
export const ERRORS_BY_KIND = {
  config: ConfigError,
  unknown_environment: UnknownEnvironment,
  unknown_profile: UnknownProfile,
  auth: AuthError,
  interaction_required: InteractionRequired,
  transport: TransportError,
  timeout: RelayTimeout,
  cancelled: Cancelled,
  limit: LimitExceeded,
  shutting_down: ShuttingDown,
  not_supported: NotSupported,
  logged_out: LoggedOut,
  store: StoreError,
  invalid_params: InvalidParams,
  parse: ProtocolError,
  invalid_request: ProtocolError,
  internal: ProtocolError,
  method_not_found: MethodNotFound,
};

/** @type {Record<number, string>} */
const KIND_BY_CODE = {
  [-32700]: 'parse', [-32600]: 'invalid_request', [-32601]: 'method_not_found', [-32602]: 'invalid_params',
  [-32603]: 'internal', [-32800]: 'cancelled', [-32004]: 'config', [-32005]: 'unknown_environment',
  [-32003]: 'unknown_profile', [-32010]: 'auth', [-32011]: 'interaction_required', [-32020]: 'transport',
  [-32021]: 'timeout', [-32022]: 'limit', [-32030]: 'shutting_down', [-32031]: 'not_supported',
  [-32032]: 'logged_out', [-32033]: 'store',
};

/**
 * Maps a JSON-RPC `error` member to its class: by `data.kind`, else by code, else RelayError.
 * @param {unknown} error
 * @returns {RelayError}
 */
export function errorFromJSON(error) {
  if (error === null || typeof error !== 'object' || Array.isArray(error)) {
    return new ProtocolError(`malformed error object: ${JSON.stringify(error)}`);
  }
  const e = /** @type {Record<string, any>} */ (error);
  const code = Number.isInteger(e.code) ? e.code : null;
  const message = typeof e.message === 'string' ? e.message : 'unknown error';
  const data = e.data !== null && typeof e.data === 'object' && !Array.isArray(e.data) ? e.data : {};
  let kind = typeof data.kind === 'string' ? data.kind : null;
  let Class = kind !== null ? ERRORS_BY_KIND[kind] : undefined;
  if (Class === undefined && code !== null && KIND_BY_CODE[code] !== undefined) {
    Class = ERRORS_BY_KIND[KIND_BY_CODE[code]];
    kind = kind ?? KIND_BY_CODE[code];
  }
  return new (Class ?? RelayError)(message, { code, kind, data });
}

#!/usr/bin/env python3
"""Generates schemas/openrpc.json (then run scripts/embed-openrpc). Edit the method list here."""
import json
S = lambda **k: k
string = {"type": "string"}
boolean = {"type": "boolean"}
integer = {"type": "integer"}
env_params = [
    {"name": "environment", "description": "Environment name; default from --env or the config's default_environment.", "schema": string},
    {"name": "profile", "description": "Profile name; default from the environment's default_profile.", "schema": string},
]
request_target = [
    {"name": "method", "description": "HTTP method (default GET).", "schema": string},
    {"name": "path", "description": "Path resolved against the environment's base_url; an RFC 6570 (levels 1-3) template expanded with pathParams. Exactly one of path or url. No control characters (bytes below 0x20, 0x7F).", "schema": string},
    {"name": "url", "description": "Absolute http(s) URL, used as is (as libcurl normalises it). Credentials and environment headers are attached only when its origin, as libcurl's URL parser reads it, is the environment's or an allowed origin. No user information, no control characters.", "schema": {"type": "string", "format": "uri"}},
    {"name": "pathParams", "description": "Variables for the path template: strings, numbers, booleans, lists or objects; strings without control characters.", "schema": {"type": "object"}},
    {"name": "query", "description": "Query parameters; an array value repeats the key; numbers and booleans are sent as their JSON text. Names and values without control characters.", "schema": {"type": "object", "additionalProperties": {"oneOf": [string, {"type": "number"}, boolean, {"type": "array", "items": {"oneOf": [string, {"type": "number"}, boolean]}}]}}},
    {"name": "headers", "description": "Request headers; they win over the environment's headers. Names are tokens; values hold no control character but tab. Content-Length, Transfer-Encoding, Host, Connection, Keep-Alive, Upgrade, TE, Trailer, Proxy-* and pseudo-headers are refused (the transport frames every request).", "schema": {"type": "object", "additionalProperties": string}},
]
body_params = [
    {"name": "json", "description": "JSON body (sent with Content-Type: application/json unless given).", "schema": {}},
    {"name": "text", "description": "UTF-8 text body.", "schema": string},
    {"name": "base64", "description": "Binary body, base64-encoded.", "schema": {"type": "string", "contentEncoding": "base64"}},
]
common_tail = [
    {"name": "timeoutMs", "description": "Bounds the whole request, token acquisition included; default the environment's timeout.", "schema": {"type": "integer", "minimum": 1}},
    {"name": "auth", "description": "false sends the request without credentials (default true).", "schema": boolean},
]
state_enum = ["connecting", "open", "reconnecting", "closed"]
error_obj = {"type": "object", "required": ["kind", "message"], "properties": {"kind": string, "message": string}}
errors = [
    (-32700, "Parse error", "parse"), (-32600, "Invalid request", "invalid_request"), (-32601, "Method not found", "method_not_found"),
    (-32602, "Invalid params (data.diagnostics: [{pointer, reason}])", "invalid_params"), (-32603, "Internal error", "internal"),
    (-32800, "Request cancelled", "cancelled"),
    (-32004, "Configuration problem", "config"), (-32005, "Unknown environment", "unknown_environment"),
    (-32003, "Unknown profile", "unknown_profile"), (-32010, "Token acquisition refused (data.oauthError, data.oauthErrorDescription when the server sent them)", "auth"),
    (-32011, "Interactive login required (data.login: true when the login method can fix it)", "interaction_required"), (-32020, "Transport failure (DNS, connect, TLS)", "transport"),
    (-32021, "Timed out", "timeout"), (-32022, "A limit was exceeded (queue, body size, failed logins)", "limit"),
    (-32030, "The server is shutting down", "shutting_down"), (-32031, "Not supported by this build or configuration", "not_supported"),
    (-32032, "A logout ended the session the request was waiting on for a token", "logged_out"),
]
def err_refs(*kinds):
    return [{"$ref": "#/components/errors/" + k} for k in kinds]
std = ("invalid_params", "internal", "cancelled", "shutting_down")
req_errs = err_refs("config", "unknown_environment", "unknown_profile", "auth", "interaction_required", "transport", "timeout", "limit", "logged_out", *std)

methods = []
# The server's protocol revision (RelayServer.protocolVersion; an agreement test keeps them equal).
protocol_version = "2026-12-01"
# initialize accepts and ignores every member it does not use; these are the LSP ones editors send.
lsp_ignored = ["clientInfo", "capabilities", "rootPath", "rootUri", "workspaceFolders", "initializationOptions", "trace", "locale", "workDoneToken"]
def method(name, summary, params, result, errs=err_refs(*std), status="implemented", direction="client-to-server", notification=False, description=None):
    m = {"name": name, "summary": summary, "paramStructure": "by-name", "params": params}
    if description: m["description"] = description
    if result is not None: m["result"] = result
    if errs and not notification: m["errors"] = errs
    m["x-status"] = status
    m["x-direction"] = direction
    if notification: m["x-notification"] = True
    methods.append(m)

method("initialize", "Optional handshake: server info, environments and profiles (names and types only), capabilities.",
    [{"name": "processId", "description": "Parent process id: tokenrelay exits when it dies.", "schema": {"type": ["integer", "null"]}},
     {"name": "protocolVersion", "description": "The revision the client speaks (read, not enforced).", "schema": string}]
    + [{"name": name, "description": "LSP member: accepted and ignored, of any shape.", "schema": {}} for name in lsp_ignored],
    {"name": "result", "schema": {"type": "object", "required": ["serverInfo", "protocolVersion", "environments", "capabilities"], "properties": {
        "serverInfo": {"type": "object", "properties": {"name": {"const": "tokenrelay"}, "version": string}},
        "protocolVersion": {"const": protocol_version},
        "environments": {"type": "array", "items": {"type": "object", "properties": {"name": string, "default": boolean, "profiles": {"type": "array", "items": {"type": "object", "properties": {"name": string, "type": string}}}}}},
        "capabilities": {"type": "object"}}}},
    description="Accepts and ignores every member it does not use (LSP clients send rootUri, workspaceFolders, capabilities of any shape, clientInfo, initializationOptions, trace, workDoneToken...).")
method("shutdown", "Stops accepting requests (they get kind shutting_down); exit then exits with 0.", [], {"name": "result", "schema": {"type": "null"}})
method("exit", "Exits: code 0 after shutdown, 1 without (LSP).", [], None, notification=True)
method("initialized", "Accepted and ignored (LSP/MCP clients send it).", [], None, notification=True)
method("notifications/initialized", "Accepted and ignored (MCP clients send it).", [], None, notification=True)
method("$/cancelRequest", "Cancels a request; it is answered with -32800.", [{"name": "id", "required": True, "schema": {"type": ["integer", "string"]}}], None, notification=True)
method("notifications/cancelled", "Cancels a request (MCP spelling); it is answered with -32800.", [{"name": "requestId", "required": True, "schema": {"type": ["integer", "string"]}}, {"name": "reason", "schema": string}], None, notification=True)
method("ping", "Answers {}.", [], {"name": "result", "schema": {"type": "object"}})
method("rpc.discover", "Returns this OpenRPC document.", [], {"name": "result", "schema": {"type": "object"}})
method("request", "Sends an HTTP request to an environment with the profile's credentials attached. Any HTTP status is a result.",
    env_params + request_target + body_params + common_tail,
    {"name": "result", "schema": {"type": "object", "required": ["status", "headers", "elapsedMs"], "properties": {
        "status": integer,
        "headers": {"type": "object", "description": "Lower-case names; repeated fields joined with ', '; set-cookie an array.", "additionalProperties": {"oneOf": [string, {"type": "array", "items": string}]}},
        "json": {"description": "Parsed body for application/json and +json types."},
        "text": {"type": "string", "description": "Other UTF-8 text bodies."},
        "base64": {"type": "string", "description": "Anything else."},
        "elapsedMs": {"type": "number"}}}},
    errs=req_errs)
method("token-invalidate", "Expires access tokens so the next use renews them; refresh state is kept.",
    env_params + [{"name": "all", "description": "Every session.", "schema": boolean}],
    {"name": "result", "schema": {"type": "object", "required": ["invalidated"], "properties": {"invalidated": integer}}},
    errs=err_refs("unknown_environment", "unknown_profile", *std))
method("logout", "Drops a session's tokens and refresh state (revoking at the server where it offers RFC 7009).",
    env_params + [{"name": "all", "schema": boolean}],
    {"name": "result", "schema": {"type": "object", "properties": {"loggedOut": integer}}},
    errs=err_refs("unknown_environment", "unknown_profile", "transport", "timeout", *std))
method("status", "Per session: token state, expiry, refresh availability, whether the token came from the session store, last error, counters; and the store (type, path, encrypted, schema version). Never a token value.", [],
    {"name": "result", "schema": {"type": "object", "required": ["sessions", "subscriptions", "store"], "properties": {
        "sessions": {"type": "array", "items": {"type": "object", "required": ["environment", "profile", "type", "state", "refreshable", "fromStore", "counters"], "properties": {
            "environment": string, "profile": string, "type": string, "state": string,
            "expiresAt": {"type": "string", "format": "date-time"}, "refreshable": boolean,
            "fromStore": {"type": "boolean", "description": "The held token was read from the store (obtained by an earlier or another process)."},
            "lastError": error_obj,
            "subject": {"type": "string", "description": "Who is logged in (interactive OpenID Connect profiles)."}, "email": string, "name": string,
            "counters": {"type": "object", "properties": {"acquisitions": integer, "renewals": integer, "recoveries": integer, "requests": integer}}}}},
        "subscriptions": integer,
        "store": {"type": "object", "required": ["type", "encrypted"], "properties": {
            "type": {"enum": ["memory", "sqlite"]}, "path": string,
            "encrypted": {"type": "boolean", "description": "false: tokens are kept in plain text in the 0600 file."},
            "schemaVersion": integer,
            "error": error_obj}}}}})
date_time = {"type": "string", "format": "date-time"}
exec_versions = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
method("token-get", "Returns an access token, only for profiles with expose_token: true (credential-helper use).",
    env_params + [
        {"name": "format", "description": "json (default): {access_token, token_type, expires_at}; header: the string 'Authorization: Bearer ...'; exec-credential: a Kubernetes ExecCredential.", "schema": {"enum": ["json", "header", "exec-credential"]}},
        {"name": "minValid", "description": "Seconds the returned token must stay valid; a held token expiring sooner is renewed first (default 60). A freshly issued token is returned even when the server grants less.", "schema": {"type": "integer", "minimum": 0, "maximum": 86400}},
        {"name": "apiVersion", "description": "The ExecCredential apiVersion (format exec-credential only; default client.authentication.k8s.io/v1).", "schema": {"enum": exec_versions}}],
    {"name": "result", "schema": {"oneOf": [
        {"title": "json", "type": "object", "required": ["access_token", "token_type"], "properties": {"access_token": string, "token_type": {"const": "Bearer"}, "expires_at": date_time}},
        {"title": "header", "type": "string", "pattern": "^Authorization: Bearer "},
        {"title": "exec-credential", "type": "object", "required": ["apiVersion", "kind", "status"], "properties": {
            "apiVersion": {"enum": exec_versions}, "kind": {"const": "ExecCredential"},
            "status": {"type": "object", "required": ["token"], "properties": {"token": string, "expirationTimestamp": date_time}}}}]}},
    errs=req_errs + err_refs("not_supported"),
    description="Interactive profiles never prompt here: without a session they answer interaction_required. The expiry fields are absent when the token server gave no expires_in.")
method("login", "Starts (or joins) the interactive login of a session (authorization code + PKCE with a loopback redirect, or device code) and answers once the session is stored; what the person must do comes as one auth-prompt notification. One login per session at a time: concurrent callers join it. At most 3 failed logins per session per 10 minutes, then kind limit. Bounded by the profile's login_timeout (then interaction_required); $/cancelRequest ends it (the last caller leaving stops the listener or the polling).", env_params,
    {"name": "result", "schema": {"type": "object", "required": ["environment", "profile", "loggedIn"], "properties": {
        "environment": string, "profile": string, "loggedIn": {"const": True},
        "expiresAt": {"type": "string", "format": "date-time"},
        "subject": {"type": "string", "description": "OpenID Connect: the validated ID token's sub."},
        "email": string, "name": string}}},
    errs=err_refs("config", "unknown_environment", "unknown_profile", "auth", "interaction_required", "transport", "timeout", "limit", "not_supported", "logged_out", *std))
# config-reload result: what the reload added, changed and removed, one {environment, profile}
# pair per profile (profile absent for an environment without profiles). A changed environment
# (its own settings: base_url, headers, timeouts, ca_file, proxy, ...) lists each of its profiles
# as changed. Lists are sorted by environment, then profile.
reload_entry = {"type": "object", "required": ["environment"], "additionalProperties": False,
                "properties": {"environment": string, "profile": string}}
reload_list = {"type": "array", "items": reload_entry}
method("config-reload", "Reloads the configuration file from the same path, with the same loader as at start (also on SIGHUP for serve). "
    "A config that fails to load changes nothing (error kind config with data.diagnostics: [{file, line, column, severity, message}]); "
    "a changed store or server section is refused the same way (data.sections; it needs a restart). Profiles are compared as written "
    "(secret sources by where they come from, not by value): unchanged ones keep their sessions, subscriptions and in-flight requests; "
    "removed ones finish their in-flight requests, new requests get unknown_environment / unknown_profile, and their subscriptions end "
    "with closed; changed ones finish their in-flight requests on the old settings, their subscriptions end with closed, and they start "
    "afresh (the held access token is not used again; refresh state is kept).", [],
    {"name": "result", "schema": {"type": "object", "required": ["added", "changed", "removed"], "additionalProperties": False,
                                  "properties": {"added": reload_list, "changed": reload_list, "removed": reload_list}}},
    errs=err_refs("config", *std))
method("subscribe", "Follows a Server-Sent-Events stream; events arrive as event notifications. Rejected inside a batch.",
    env_params + request_target + [{"name": "lastEventId", "description": "Sent as Last-Event-ID on the first connection; no control characters.", "schema": string}] + common_tail,
    {"name": "result", "schema": {"type": "object", "required": ["subscription"], "properties": {"subscription": string}}},
    errs=req_errs)
method("unsubscribe", "Closes a subscription (and cancels a pending token acquisition).", [{"name": "subscription", "required": True, "schema": string}],
    {"name": "result", "schema": {"type": "object", "properties": {"subscription": string, "closed": boolean}}})

# server -> client notifications
method("event", "One SSE event of a subscription.", [
    {"name": "subscription", "required": True, "schema": string}, {"name": "id", "description": "Last-event ID in effect at dispatch; absent when none.", "schema": string},
    {"name": "event", "required": True, "description": "Event type (default message).", "schema": string},
    {"name": "data", "required": True, "description": "Data lines joined with \\n.", "schema": string},
    {"name": "retry", "description": "Present when the event's block carried a valid retry field (ms).", "schema": integer}],
    None, notification=True, direction="server-to-client")
method("subscription-state", "A subscription's connection state.", [
    {"name": "subscription", "required": True, "schema": string}, {"name": "state", "required": True, "schema": {"enum": state_enum}},
    {"name": "attempt", "schema": integer}, {"name": "retryInMs", "schema": integer}, {"name": "status", "schema": integer},
    {"name": "error", "schema": error_obj}], None, notification=True, direction="server-to-client")
method("auth-prompt", "What the person must do to log in: open url in a browser (kind browser), or open url and enter userCode (kind device). Sent once per login, however many callers joined it. The URL carries state, nonce and the PKCE challenge, never a secret. tokenrelay never reads the terminal and opens a browser only when the profile's open_browser says so.", [
    {"name": "environment", "required": True, "schema": string}, {"name": "profile", "required": True, "schema": string},
    {"name": "kind", "required": True, "schema": {"enum": ["browser", "device"]}}, {"name": "url", "required": True, "schema": string},
    {"name": "userCode", "schema": string}, {"name": "verificationUriComplete", "schema": string},
    {"name": "expiresAt", "required": True, "schema": {"type": "string", "format": "date-time"}}],
    None, notification=True, direction="server-to-client")
method("auth-failed", "A renewal was refused (refresh grant or re-acquisition rejected, or excessive renewals) — distinct from a request being unauthorized.", [
    {"name": "environment", "required": True, "schema": string}, {"name": "profile", "required": True, "schema": string},
    {"name": "kind", "required": True, "schema": string}, {"name": "message", "schema": string},
    {"name": "oauthError", "schema": string}, {"name": "oauthErrorDescription", "schema": string}],
    None, notification=True, direction="server-to-client")
method("log", "Optional log line for clients that ask for one.", [{"name": "level", "schema": string}, {"name": "message", "schema": string}],
    None, notification=True, direction="server-to-client", status="planned")

doc = {
    "openrpc": "1.3.2",
    "info": {"title": "tokenrelay", "version": "0.1.0",
             "description": "JSON-RPC 2.0 over stdin/stdout (NDJSON or Content-Length framing). Methods a client calls have x-direction client-to-server; notifications the server sends have x-direction server-to-client. x-status planned marks what this build does not implement yet. Every error's data carries a stable kind. Absent params, \"params\": null and [] all mean no params, and an object-typed member given as [] is an empty object (Lua and Emacs encode an empty table so). A notification (a method and no id) is never answered, even when invalid. tokenrelay's own methods reject unknown members; initialize ignores them. No code takes a meaning LSP reserves (-32001, -32002, -32803..-32801).", "x-protocolVersion": protocol_version},
    "methods": methods,
    "components": {"errors": {kind: {"code": code, "message": msg, "data": {"kind": kind}} for code, msg, kind in errors}},
}
open(__import__("os").path.join(__import__("os").path.dirname(__import__("os").path.abspath(__file__)), "..", "schemas", "openrpc.json"), "w").write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")

-- tokenrelay for Neovim (>= 0.7): authenticated HTTP requests and Server-Sent-Events
-- subscriptions through one tokenrelay process, started on first use and stopped on
-- VimLeavePre. See :help tokenrelay.

local rpc = require('tokenrelay.rpc')

local M = {}

M.version = '0.1.0'

local defaults = {
  cmd = nil, -- string or list; default $TOKENRELAY_BIN, else 'tokenrelay' on PATH
  config = nil, -- --config PATH (else $TOKENRELAY_CONFIG, else ~/.config/tokenrelay/config.yaml)
  env = nil, -- --env NAME: the default environment
  environ = nil, -- extra environment variables for the process, e.g. { STAGING_SECRET = ... }
  log_level = nil, -- --log-level error|warn|info|debug|trace
  args = {}, -- more arguments for `tokenrelay serve`
  timeout_ms = 30000, -- bound of the blocking calls (request_sync, status_sync, ...)
  on_auth_prompt = nil, -- function(prompt); default: vim.notify + offer to open the URL
  open_url = nil, -- function(url); default vim.ui.open (0.10+), else xdg-open / open
  on_notification = nil, -- function(method, params) for auth-failed, log, ...
}

local config = vim.deepcopy(defaults)
local state = {
  conn = nil, -- the running rpc connection
  info = nil, -- the initialize result
  subs = {}, -- subscription id -> Subscription
  last_error = nil, -- the latest error a call returned
  last_exit = nil, -- exit code of the previous process
  last_response = nil, -- what :TokenRelay request showed last
}

local function notify(msg, level)
  vim.notify('tokenrelay: ' .. msg, level or vim.log.levels.INFO)
end

local function remember(err)
  if err then
    state.last_error = err
  end
  return err
end

--- Sets the options (see :help tokenrelay-setup). A running process is stopped: the next call
--- starts one with the new options.
function M.setup(opts)
  config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  if state.conn and state.conn:running() then
    M.stop()
  end
  return M
end

--- The options in effect.
function M.options()
  return vim.deepcopy(config)
end

--- The command that runs tokenrelay (a list), before any subcommand.
function M.binary_argv()
  local cmd = config.cmd or vim.env.TOKENRELAY_BIN or 'tokenrelay'
  return type(cmd) == 'table' and vim.deepcopy(cmd) or { cmd }
end

--- The command line of `tokenrelay serve` for the options.
function M.argv()
  local argv = M.binary_argv()
  vim.list_extend(argv, { 'serve', '--framing', 'ndjson' })
  if config.config then
    vim.list_extend(argv, { '--config', vim.fn.expand(config.config) })
  end
  if config.env then
    vim.list_extend(argv, { '--env', config.env })
  end
  if config.log_level then
    vim.list_extend(argv, { '--log-level', config.log_level })
  end
  vim.list_extend(argv, config.args or {})
  return argv
end

local on_notification -- defined below

--- Starts the process if it is not running; returns the connection, or nil and an error.
function M.start()
  if state.conn and state.conn:running() then
    return state.conn
  end
  local conn, err
  conn, err = rpc.spawn({
    argv = M.argv(),
    environ = config.environ,
    on_notification = function(method, params)
      on_notification(method, params)
    end,
    on_exit = function(code)
      if state.conn ~= conn then
        return -- a process stop() already accounted for
      end
      state.last_exit = code
      for id, sub in pairs(state.subs) do
        state.subs[id] = nil
        sub:_closed(rpc.error('closed', string.format('tokenrelay exited with status %d', code)))
      end
      vim.cmd('redrawstatus')
    end,
  })
  if not conn then
    return nil, remember(err)
  end
  state.conn = conn
  state.info = nil
  conn:request('initialize', {
    processId = vim.fn.getpid(),
    clientInfo = { name = 'tokenrelay.nvim', version = M.version },
  }, function(e, result)
    if e then
      remember(e)
      notify('initialize failed: ' .. tostring(e), vim.log.levels.ERROR)
    else
      state.info = result
    end
  end)
  return conn
end

--- The initialize result (serverInfo, protocolVersion, environments, capabilities), or nil
--- before it arrived. `wait_ms` waits for it (starting the process if needed).
function M.info(wait_ms)
  if wait_ms and not state.info then
    if M.start() then
      vim.wait(wait_ms, function()
        return state.info ~= nil or not state.conn:running()
      end, 5)
    end
  end
  return state.info
end

--- How many requests wait for their answer.
function M.in_flight()
  return state.conn and state.conn.in_flight or 0
end

--- The running process's pid, or nil.
function M.pid()
  return state.conn and state.conn:running() and state.conn.pid or nil
end

--- The last lines the process (or the one before it, once stopped) wrote to stderr (its
--- log), oldest first.
function M.stderr()
  local conn = state.conn or state.last_conn
  return conn and vim.deepcopy(conn.stderr) or {}
end

-- Calls `method` and hands callback(err, result); returns the request id (or nil).
local function call(method, params, callback, opts)
  local conn, err = M.start()
  if not conn then
    callback(err, nil)
    return nil
  end
  return conn:request(method, params, function(e, result)
    remember(e)
    callback(e, result)
  end, opts)
end

-- Like call(), blocking up to timeout_ms; returns result, err.
local function call_sync(method, params, timeout_ms)
  local conn, err = M.start()
  if not conn then
    return nil, err
  end
  local result, e = conn:request_sync(method, params, timeout_ms or config.timeout_ms)
  return result, remember(e)
end

--- Any method by name; callback(err, result). Returns the request id.
function M.call(method, params, callback, opts)
  return call(method, params, callback or function() end, opts)
end

--- Any method by name, blocking; returns result, err.
function M.call_sync(method, params, timeout_ms)
  return call_sync(method, params, timeout_ms)
end

-- request/subscribe params as the protocol wants them: object-typed members that are empty
-- tables become objects (Lua cannot tell {} from []).
local function request_params(params)
  if type(params) == 'string' then
    params = { path = params }
  end
  local p = vim.deepcopy(params or {})
  for _, key in ipairs({ 'query', 'headers', 'pathParams' }) do
    p[key] = rpc.object(p[key])
  end
  return p
end
M._request_params = request_params

--- An HTTP request through tokenrelay. `params`: see :help tokenrelay-request (a string is a
--- path). `callback(err, response)`: any HTTP status is a response. Returns a handle with
--- `id` and `cancel()` (the callback then gets an error of kind `cancelled`).
function M.request(params, callback)
  local p = request_params(params)
  local opts = p.timeoutMs and { timeout_ms = p.timeoutMs + rpc.TIMEOUT_SLACK_MS } or nil
  local id = call('request', p, callback or function() end, opts)
  return {
    id = id,
    cancel = function()
      if id and state.conn then
        state.conn:cancel(id)
      end
    end,
  }
end

--- Blocking request: returns response, err. Gives up (and cancels) after `timeout_ms`
--- (default: the setup option `timeout_ms`).
function M.request_sync(params, timeout_ms)
  return call_sync('request', request_params(params), timeout_ms)
end

-- Subscriptions ------------------------------------------------------------------------------

local Subscription = {}
Subscription.__index = Subscription

function Subscription:_event(params)
  if self.closed or not self.on_event then
    return
  end
  self.on_event({ id = params.id, event = params.event or 'message', data = params.data, retry = params.retry })
end

function Subscription:_state(params)
  self.state = params
  if self.on_state then
    self.on_state(params)
  end
  if params.state == 'closed' then
    self.closed = true
    state.subs[self.id] = nil
    vim.cmd('redrawstatus')
  end
end

function Subscription:_closed(err)
  if self.state and self.state.state == 'closed' then
    return
  end
  self.closed = true
  self:_state({ subscription = self.id, state = 'closed', error = err and { kind = err.kind, message = err.message } })
end

--- Closes the subscription (idempotent); `callback(err)` once the server confirmed.
function Subscription:unsubscribe(callback)
  callback = callback or function() end
  if self.unsubscribing then
    callback(nil)
    return
  end
  self.unsubscribing = true
  self.closed = true -- no event reaches on_event after this call
  if not self.id then
    self.unsubscribe_after_reply = callback
    return
  end
  if not state.subs[self.id] then
    callback(nil)
    return
  end
  call('unsubscribe', { subscription = self.id }, function(err)
    callback(err)
  end)
end

--- Follows an SSE stream. `params` like request (GET only, plus lastEventId); `handlers`:
--- `on_event(event)` with {id?, event, data, retry?}, `on_state(state)` with each
--- subscription-state, `on_error(err)` when subscribe itself fails. Returns a handle:
--- `unsubscribe(callback?)`, `id` (once registered), `state` (the latest state).
function M.subscribe(params, handlers)
  handlers = handlers or {}
  local sub = setmetatable({
    on_event = handlers.on_event,
    on_state = handlers.on_state,
    on_error = handlers.on_error,
    closed = false,
  }, Subscription)
  call('subscribe', request_params(params), function(err, result)
    if err then
      sub.closed = true
      sub.error = err
      if sub.unsubscribe_after_reply then
        sub.unsubscribe_after_reply(nil)
      end
      if sub.on_error then
        sub.on_error(err)
      else
        notify('subscribe failed: ' .. tostring(err), vim.log.levels.ERROR)
      end
      return
    end
    sub.id = result and result.subscription and tostring(result.subscription)
    if not sub.id then
      return
    end
    state.subs[sub.id] = sub
    if sub.unsubscribe_after_reply then
      local cb = sub.unsubscribe_after_reply
      sub.unsubscribe_after_reply = nil
      call('unsubscribe', { subscription = sub.id }, cb)
    end
  end)
  return sub
end

--- The open subscriptions, by id.
function M.subscriptions()
  return vim.tbl_extend('force', {}, state.subs)
end

-- Sessions -----------------------------------------------------------------------------------

--- `status`: callback(err, {sessions, subscriptions}). Never contains a token.
function M.status(callback)
  return call('status', nil, callback or function() end)
end

--- Blocking status: returns result, err.
function M.status_sync(timeout_ms)
  return call_sync('status', nil, timeout_ms)
end

--- `token-invalidate` {environment?, profile?, all?}: callback(err, count).
function M.invalidate(opts, callback)
  callback = callback or function() end
  return call('token-invalidate', opts or {}, function(err, result)
    callback(err, result and result.invalidated)
  end)
end

--- `logout` {environment?, profile?, all?}: drops the session's refresh state too.
function M.logout(opts, callback)
  return call('logout', opts or {}, callback or function() end)
end

local function open_url(url)
  if config.open_url then
    return config.open_url(url)
  end
  if vim.ui.open then -- 0.10+
    return vim.ui.open(url)
  end
  local opener = vim.fn.has('mac') == 1 and 'open' or 'xdg-open'
  if vim.fn.executable(opener) ~= 1 then
    notify('no ' .. opener .. ' to open ' .. url, vim.log.levels.WARN)
    return
  end
  vim.fn.jobstart({ opener, url }, { detach = true })
end

--- The logins whose prompt was shown (environment/profile, URL and code), so that a login's
--- auth-prompt and its session-changed ask the person once.
local shown_logins = {}

--- How an auth-prompt notification is shown by default: a message, then a choice to open the
--- URL in a browser or copy it.
function M.show_auth_prompt(prompt)
  shown_logins[string.format('%s/%s %s %s', prompt.environment, prompt.profile, prompt.url, prompt.userCode or '')] = true
  local where = string.format('%s/%s', prompt.environment or '?', prompt.profile or '?')
  local url = prompt.verificationUriComplete or prompt.url
  local text
  if prompt.kind == 'device' and prompt.userCode then
    text = string.format('log in to %s: open %s and enter the code %s', where, prompt.url, prompt.userCode)
  else
    text = string.format('log in to %s: open %s', where, tostring(prompt.url))
  end
  if prompt.expiresAt then
    text = text .. ' (before ' .. prompt.expiresAt .. ')'
  end
  notify(text, vim.log.levels.WARN)
  if type(url) ~= 'string' then
    return
  end
  vim.schedule(function()
    vim.ui.select({ 'Open in browser', 'Copy URL', 'Ignore' }, { prompt = 'tokenrelay login (' .. where .. ')' }, function(choice)
      if choice == 'Open in browser' then
        open_url(url)
      elseif choice == 'Copy URL' then
        vim.fn.setreg('+', url)
        vim.fn.setreg('"', url)
      end
    end)
  end)
end

--- How a session-changed notification (after watch_sessions) is shown by default: one that says
--- the session needs a person (reason login-required, or state interaction_required) as
--- "log in to ENV/PROFILE", with what to open when a login is under way; the others are not shown.
function M.show_session_change(change)
  if change.reason ~= 'login-required' and change.state ~= 'interaction_required' then
    return
  end
  local login = change.login
  if type(login) == 'table' and type(login.url) == 'string' then
    -- The same login's auth-prompt (this Neovim's own login) was shown already: ask once.
    local key = string.format('%s/%s %s %s', change.environment, change.profile, login.url, login.userCode or '')
    if shown_logins[key] then
      return
    end
    M.show_auth_prompt(vim.tbl_extend('force', login, { environment = change.environment, profile = change.profile }))
    return
  end
  notify(
    string.format('log in to %s/%s (:TokenRelay login %s)', change.environment or '?', change.profile or '?', change.profile or ''),
    vim.log.levels.WARN
  )
end

--- `watch-sessions` {environment?, profile?}: every session's state now, then each change as a
--- session-changed notification (those other tokenrelay processes make included), shown by the
--- setup option `on_session_changed` (default show_session_change). callback(err, result).
function M.watch_sessions(opts, callback)
  return call('watch-sessions', opts or {}, callback or function() end)
end

--- `login` {environment?, profile?}: an interactive login (authorization code or device
--- code). While it waits, each auth-prompt goes to the setup option `on_auth_prompt` (default
--- show_auth_prompt). callback(err, result) when the session is stored or the login failed.
function M.login(opts, callback)
  callback = callback or function() end
  return call('login', opts or {}, callback)
end

on_notification = function(method, params)
  if method == 'event' or method == 'subscription-state' then
    local sub = state.subs[tostring(params.subscription)]
    if sub then
      if method == 'event' then
        sub:_event(params)
      else
        sub:_state(params)
      end
    end
    return
  end
  if method == 'auth-prompt' then
    (config.on_auth_prompt or M.show_auth_prompt)(params)
  elseif method == 'session-changed' then
    (config.on_session_changed or M.show_session_change)(params)
  elseif method == 'auth-failed' then
    notify(
      string.format('renewal refused for %s/%s: %s', params.environment or '?', params.profile or '?', params.oauthError or params.message or params.kind or ''),
      vim.log.levels.WARN
    )
  end
  if config.on_notification then
    config.on_notification(method, params)
  end
end

--- `shutdown` + `exit`, bounded (default 5 s); blocks and returns the exit code (nil when
--- nothing ran).
function M.stop(timeout_ms)
  local conn = state.conn
  if not conn then
    return state.last_exit
  end
  local code = conn:stop(timeout_ms)
  state.last_exit = code
  state.last_conn = conn
  state.conn = nil
  state.info = nil
  for id, sub in pairs(state.subs) do
    state.subs[id] = nil
    sub:_closed(nil)
  end
  return code
end

--- A short text for 'statusline': '' before the first use, else e.g.
--- "tokenrelay:staging 2 req 1 sub", "tokenrelay:staging !auth" (the last error's kind) or
--- "tokenrelay exited (1)".
function M.statusline()
  local conn = state.conn
  if not conn then
    return state.last_exit and state.last_exit ~= 0 and string.format('tokenrelay exited (%d)', state.last_exit) or ''
  end
  if not conn:running() then
    return string.format('tokenrelay exited (%d)', conn.exit_code)
  end
  local env = config.env
  if not env and state.info then
    for _, e in ipairs(state.info.environments or {}) do
      if e.default then
        env = e.name
      end
    end
  end
  local text = env and ('tokenrelay:' .. env) or 'tokenrelay'
  if conn.in_flight > 0 then
    text = text .. ' ' .. conn.in_flight .. ' req'
  end
  local subs = vim.tbl_count(state.subs)
  if subs > 0 then
    text = text .. ' ' .. subs .. ' sub'
  end
  if state.last_error and state.last_error.kind ~= 'cancelled' then
    text = text .. ' !' .. state.last_error.kind
  end
  return text
end

--- The last error a call returned (or nil); cleared by clear_error().
function M.last_error()
  return state.last_error
end

function M.clear_error()
  state.last_error = nil
end

--- Called by plugin/tokenrelay.lua on VimLeavePre.
function M._on_vim_leave()
  if state.conn and state.conn:running() then
    M.stop(2000)
  end
end

-- The :TokenRelay command lives in tokenrelay.command (loaded on first use).
function M.command(args)
  return require('tokenrelay.command').run(args)
end

function M.complete(arglead, cmdline)
  return require('tokenrelay.command').complete(arglead, cmdline)
end

--- What :TokenRelay request showed last: {params, response?, err?, elapsed_ms}.
function M.last_response()
  return state.last_response
end

function M._set_last_response(r)
  state.last_response = r
end

return M

-- End-to-end tests of tokenrelay.nvim inside a real headless Neovim, driving the real binary
-- against the interop stack (a real Django OAuth Toolkit AS and the SSE resource server):
--
--   TOKENRELAY_STACK_ENV=.../stack.env [TOKENRELAY_BIN=...] \
--     nvim --headless -u NONE -c 'luafile clients/neovim/test/run.lua'
--
-- Prints "ok - NAME" / "not ok - NAME: why" per test, a round-trip figure, and a closing
-- "N passed, N failed"; exits 1 when a test failed. TOKENRELAY_TRANSCRIPT=FILE also writes the
-- session (commands and what they showed) to FILE, for the README.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
local plugin_root = vim.fn.fnamemodify(here, ':h')
local repo = vim.fn.fnamemodify(plugin_root, ':h:h')
vim.opt.runtimepath:prepend(plugin_root)
vim.cmd('runtime plugin/tokenrelay.lua')

local uv = vim.uv or vim.loop
local out = io.stdout
local function say(line)
  out:write(line .. '\n')
  out:flush()
end

local results = { passed = 0, failed = 0 }
local function finish()
  say(string.format('%d passed, %d failed', results.passed, results.failed))
  vim.cmd(results.failed == 0 and 'qall!' or 'cquit! 1')
end

local ok_env, stack = pcall(function()
  local path = assert(vim.env.TOKENRELAY_STACK_ENV, 'TOKENRELAY_STACK_ENV is not set (no interop stack)')
  local json = vim.fn.system({
    'bash',
    '-c',
    'set -a; . "$1"; exec python3 -c "import json, os; print(json.dumps(dict(os.environ)))"',
    'bash',
    path,
  })
  assert(vim.v.shell_error == 0, 'cannot read ' .. path)
  return vim.json.decode(json)
end)
local binary = vim.env.TOKENRELAY_BIN or (repo .. '/.build/debug/tokenrelay')
if not ok_env or vim.fn.executable(binary) ~= 1 then
  say('not ok - setup: ' .. (ok_env and ('no tokenrelay binary at ' .. binary) or tostring(stack)))
  results.failed = 1
  return finish()
end

-- The config: environment `stack` on the resource server, profile `service` (client
-- credentials at the real AS) whose secret comes from the process environment.
local secret = stack.CLIENT_SECRET or 'svc-secret'
local client_id = stack.CLIENT_ID or 'svc'
local dir = vim.fn.tempname()
vim.fn.mkdir(dir, 'p')
local config_path = dir .. '/config.yaml'
-- Does this binary implement login? Then the config gets a device-code profile too (client
-- `tv` at the AS, approved as alice by approve_device.py).
local has_login = vim.fn.system({ binary, '--framing', 'ndjson' }, '{"jsonrpc":"2.0","id":1,"method":"initialize"}\n'):find('"login"', 1, true) ~= nil
local profiles = {
  service = {
    type = 'client_credentials',
    issuer = stack.ISSUER,
    token_url = stack.TOKEN_URL,
    client_id = client_id,
    client_secret = { env = 'TOKENRELAY_NVIM_TEST_SECRET' },
  },
}
if has_login then
  profiles.tv = {
    type = 'device_code',
    issuer = stack.ISSUER,
    token_url = stack.TOKEN_URL,
    device_authorization_url = stack.AS_URL .. '/o/device-authorization/',
    client_id = 'tv',
  }
end
vim.fn.writefile({
  vim.json.encode({
    version = 1,
    default_environment = 'stack',
    environments = { stack = { base_url = stack.RS_URL, default_profile = 'service', profiles = profiles } },
  }),
}, config_path)

-- Everything shown to the user is recorded too, for the canary.
local notified = {}
vim.notify = function(msg, level)
  table.insert(notified, { msg = msg, level = level })
end

local tokenrelay = require('tokenrelay')
tokenrelay.setup({
  cmd = binary,
  config = config_path,
  log_level = 'debug', -- the canary below reads every log line at debug level
  environ = { TOKENRELAY_NVIM_TEST_SECRET = secret },
})

local transcript = {}
local function record(lines)
  vim.list_extend(transcript, type(lines) == 'table' and lines or { lines })
end

local function wait(ms, condition, what)
  if not vim.wait(ms, condition, 5) then
    error('timed out waiting for ' .. what, 2)
  end
end

local function eq(actual, expected, what)
  if actual ~= expected then
    error(string.format('%s: expected %s, got %s', what, vim.inspect(expected), vim.inspect(actual)), 2)
  end
end

local function truthy(value, what)
  if not value then
    error(what, 2)
  end
  return value
end

local function test(name, f)
  local ok, err = xpcall(f, debug.traceback)
  if ok then
    results.passed = results.passed + 1
    say('ok - ' .. name)
  else
    results.failed = results.failed + 1
    say('not ok - ' .. name .. ': ' .. tostring(err):gsub('\n', '\n#   '))
  end
end

local function buffer_text(name)
  local buf = vim.fn.bufnr(name)
  if buf == -1 then
    return nil
  end
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

-- Runs `:TokenRelay request ...` and waits for the User TokenRelayResponse autocmd; returns
-- the recorded response and the milliseconds from the command to the rendered buffer.
local response_seen = 0
vim.api.nvim_create_autocmd('User', {
  pattern = 'TokenRelayResponse',
  callback = function()
    response_seen = response_seen + 1
  end,
})
local function command_request(args)
  local before = response_seen
  local t0 = uv.hrtime()
  vim.cmd('TokenRelay request ' .. args)
  wait(30000, function()
    return response_seen > before
  end, ':TokenRelay request ' .. args)
  return tokenrelay.last_response(), (uv.hrtime() - t0) / 1e6
end

local function session(status, profile)
  for _, s in ipairs(status.sessions) do
    if s.environment == 'stack' and s.profile == profile then
      return s
    end
  end
end

test('initialize reports the server, its environments and methods', function()
  local info = truthy(tokenrelay.info(20000), 'no initialize result')
  eq(info.serverInfo.name, 'tokenrelay', 'serverInfo.name')
  eq(info.environments[1].name, 'stack', 'environment')
  eq(info.environments[1].default, true, 'default environment')
  truthy(vim.tbl_contains(info.capabilities.methods, 'request'), 'capabilities.methods lacks request')
  truthy(tokenrelay.pid(), 'no pid')
end)

test('an authenticated GET returns the resource server view of the client', function()
  local response, err = tokenrelay.request_sync({ path = '/whoami' }, 30000)
  eq(err, nil, 'error')
  eq(response.status, 200, 'status')
  eq(response.json.client_id, client_id, 'client_id')
  eq(response.headers['content-type'], 'application/json', 'content-type')
end)

test('an authenticated POST with a JSON body reaches the resource server once', function()
  local tag = 'nvim-post-' .. uv.hrtime()
  local response, err = tokenrelay.request_sync({
    method = 'POST',
    path = '/echo',
    headers = { ['X-Request-Tag'] = tag },
    query = {},
    json = { name = 'neovim', n = 3, empty = vim.empty_dict(), list = { 1, 2 } },
  }, 30000)
  eq(err, nil, 'error')
  eq(response.status, 200, 'status')
  eq(response.json.method, 'POST', 'method')
  eq(response.json.client_id, client_id, 'client_id')
  local body = vim.json.decode(response.json.body)
  eq(body.name, 'neovim', 'body.name')
  eq(vim.json.encode(body.empty), '{}', 'empty object stays an object')
  local counters = tokenrelay.request_sync({ path = '/counters', query = { tag = tag }, auth = false }, 30000)
  eq(counters.json.received, 1, 'received')
end)

test('a 404 is a response, not an error', function()
  local response, err = tokenrelay.request_sync({ path = '/status/404' }, 30000)
  eq(err, nil, 'error')
  eq(response.status, 404, 'status')
end)

test(':TokenRelay request GET /whoami shows the response in a buffer', function()
  record({ ':TokenRelay request GET /whoami' })
  local last = command_request('GET /whoami')
  eq(last.err, nil, 'error')
  eq(last.response.status, 200, 'status')
  local text = truthy(buffer_text('tokenrelay://response'), 'no response buffer')
  truthy(text:find('GET /whoami %-> 200'), 'no status line in: ' .. text)
  truthy(text:find('"client_id": "' .. client_id .. '"', 1, true), 'no client_id in: ' .. text)
  record(vim.split(text, '\n', { plain = true }))
end)

test(':TokenRelay request POST with a JSON body, and a 404 as data', function()
  record({ '', ':TokenRelay request POST /echo {"hello": "from neovim"}' })
  local last = command_request('POST /echo {"hello": "from neovim"}')
  eq(last.response.status, 200, 'status')
  eq(last.response.json.body, '{"hello":"from neovim"}', 'body sent')
  local text = buffer_text('tokenrelay://response')
  record(vim.split(text, '\n', { plain = true }))
  record({ '', ':TokenRelay request GET /nope' })
  last = command_request('GET /nope')
  eq(last.err, nil, 'error')
  eq(last.response.status, 404, 'status')
  text = buffer_text('tokenrelay://response')
  truthy(text:find('GET /nope %-> 404'), 'no 404 line in: ' .. text)
  record(vim.split(text, '\n', { plain = true }))
end)

test('subscribe delivers 5 events in order, then unsubscribe closes it', function()
  local events, states = {}, {}
  local sub = tokenrelay.subscribe({ path = '/events', query = { count = -1, interval = 0.05 } }, {
    on_event = function(ev)
      table.insert(events, ev)
    end,
    on_state = function(s)
      table.insert(states, s.state)
    end,
  })
  wait(30000, function()
    return #events >= 5
  end, '5 events')
  local unsubscribed, unsubscribe_err = false, nil
  sub:unsubscribe(function(err)
    unsubscribed, unsubscribe_err = true, err
  end)
  wait(30000, function()
    return unsubscribed and sub.closed and states[#states] == 'closed'
  end, 'unsubscribe and the closed state')
  eq(unsubscribe_err, nil, 'unsubscribe error')
  eq(#events, 5, 'events after unsubscribe') -- none reaches on_event after unsubscribe()
  for i, ev in ipairs(events) do
    eq(ev.id, tostring(i), 'event id')
    eq(ev.event, 'tick', 'event name')
    eq(vim.json.decode(ev.data).seq, i, 'event seq')
  end
  truthy(vim.tbl_contains(states, 'open'), 'no open state: ' .. vim.inspect(states))
  local status = tokenrelay.status_sync(30000)
  eq(status.subscriptions, 0, 'subscriptions open on the server')
  eq(vim.tbl_count(tokenrelay.subscriptions()), 0, 'subscriptions open in the client')
end)

test(':TokenRelay subscribe fills a buffer; wiping it unsubscribes', function()
  record({ '', ':TokenRelay subscribe /events' })
  vim.cmd('TokenRelay subscribe /events')
  local name
  wait(30000, function()
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_get_name(buf):find('tokenrelay://events/', 1, true) then
        local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
        local n = 0
        for _, l in ipairs(lines) do
          if l:find('] tick: ', 1, true) then
            n = n + 1
          end
        end
        if n >= 5 then
          name = buf
          return true
        end
      end
    end
    return false
  end, '5 event lines')
  record(vim.api.nvim_buf_get_lines(name, 0, -1, false))
  vim.cmd('bwipeout! ' .. name)
  wait(30000, function()
    return vim.tbl_count(tokenrelay.subscriptions()) == 0
  end, 'the subscription to close')
  eq(tokenrelay.status_sync(30000).subscriptions, 0, 'subscriptions open on the server')
end)

test('cancelling a slow request answers it with kind cancelled, and the process keeps serving', function()
  local err, response, done = nil, nil, false
  local before = tokenrelay.in_flight()
  local handle = tokenrelay.request({ path = '/slow', query = { delay = 60 }, auth = false }, function(e, r)
    err, response, done = e, r, true
  end)
  -- The request is in flight on the server (the resource server holds it for 60 s).
  eq(tokenrelay.in_flight(), before + 1, 'requests in flight')
  local line = tokenrelay.statusline()
  truthy(line:find(' %d+ req'), 'statusline does not show the request in flight: ' .. line)
  handle.cancel()
  wait(20000, function()
    return done
  end, 'the cancelled answer')
  eq(response, nil, 'response')
  eq(err.kind, 'cancelled', 'kind')
  eq(err.code, -32800, 'code')
  -- A client-side bound cancels too.
  local r2, e2 = tokenrelay.request_sync({ path = '/slow', query = { delay = 60 }, auth = false }, 300)
  eq(r2, nil, 'response after timeout')
  eq(e2.kind, 'timeout', 'kind after timeout')
  local again = tokenrelay.request_sync({ path = '/whoami' }, 30000)
  eq(again.status, 200, 'status after cancellations')
end)

test("Neovim's own encoding of an empty table ([]) is accepted for an object member", function()
  -- call() passes params as given: vim.json.encode turns query = {} into "query": [].
  eq(vim.json.encode({ query = {} }), '{"query":[]}', 'the encoding this test relies on')
  local result, err = tokenrelay.call_sync('request', { path = '/whoami', query = {}, headers = {} }, 30000)
  eq(err, nil, 'error')
  eq(result.status, 200, 'status')
end)

test('an error in a callback is reported and the frames after it in the same chunk still arrive', function()
  local conn = assert(tokenrelay.start())
  local before = #notified
  local second
  local id1 = conn:request('no-such-method', nil, function()
    error('boom from a callback')
  end)
  local id2 = conn:request('no-such-method', nil, function(e)
    second = e
  end)
  -- Both answers in one chunk, ahead of the server's own (which then find no caller).
  conn:_on_stdout({
    vim.json.encode({ jsonrpc = '2.0', id = id1, result = vim.empty_dict() }),
    vim.json.encode({ jsonrpc = '2.0', id = id2, error = { code = -32601, message = 'nope', data = { kind = 'method_not_found' } } }),
    '',
  })
  eq(second and second.kind, 'method_not_found', 'the second answer')
  wait(5000, function()
    return #notified > before
  end, 'the report of the failing callback')
  truthy(notified[before + 1].msg:find('boom from a callback', 1, true), 'report: ' .. notified[before + 1].msg)
  tokenrelay.clear_error()
end)

test('errors carry their kind: unknown environment', function()
  local response, err = tokenrelay.request_sync({ path = '/whoami', environment = 'nope' }, 30000)
  eq(response, nil, 'response')
  eq(err.kind, 'unknown_environment', 'kind')
  tokenrelay.clear_error()
end)

test('status shows the session and its counters; invalidate renews once', function()
  local status = tokenrelay.status_sync(30000)
  local s = truthy(session(status, 'service'), 'no stack/service session')
  eq(s.state, 'valid', 'state')
  eq(s.type, 'client_credentials', 'type')
  truthy(s.counters.requests >= 4, 'requests counter ' .. tostring(s.counters.requests))
  local before = (s.counters.acquisitions or 0) + (s.counters.renewals or 0)
  local count
  tokenrelay.invalidate({ environment = 'stack', profile = 'service' }, function(_, n)
    count = n
  end)
  wait(30000, function()
    return count ~= nil
  end, 'invalidate')
  eq(count, 1, 'invalidated')
  eq(tokenrelay.request_sync({ path = '/whoami' }, 30000).status, 200, 'status after invalidate')
  s = session(tokenrelay.status_sync(30000), 'service')
  eq((s.counters.acquisitions or 0) + (s.counters.renewals or 0), before + 1, 'acquisitions + renewals')
  record({ '', ':TokenRelay status' })
  vim.cmd('TokenRelay status')
  wait(30000, function()
    local text = buffer_text('tokenrelay://status')
    return text and text:find('service', 1, true)
  end, 'the status buffer')
  record(vim.split(buffer_text('tokenrelay://status'), '\n', { plain = true }))
end)

test(':checkhealth tokenrelay reports binary, config and sessions', function()
  vim.cmd('checkhealth tokenrelay')
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  truthy(text:find('OK:? binary: ' .. vim.pesc(binary)), 'no binary line in: ' .. text)
  truthy(text:find('OK:? config valid'), 'no config line in: ' .. text)
  truthy(text:find('session stack/service %(client_credentials%): valid'), 'no session line in: ' .. text)
  truthy(not text:find('ERROR'), 'an error in: ' .. text)
  record({ '', ':checkhealth tokenrelay' })
  record(vim.api.nvim_buf_get_lines(0, 0, -1, false))
  vim.cmd('tabclose')
end)

test('the statusline names the environment', function()
  local line = tokenrelay.statusline()
  truthy(line:find('^tokenrelay:stack'), 'statusline: ' .. line)
end)

-- The round trip of :TokenRelay request: from the command to the rendered buffer (a figure,
-- not an assertion).
local function median_round_trip(args, n)
  local times = {}
  for _ = 1, n do
    local last, ms = command_request(args)
    assert(last.response and last.response.status == 200, 'round trip failed: ' .. tostring(last.err))
    table.insert(times, ms)
  end
  table.sort(times)
  return times[math.floor((n + 1) / 2)], times[1], times[math.ceil(n * 0.9)]
end

test('round trip of :TokenRelay request (50 each)', function()
  for _, args in ipairs({ 'GET /whoami', 'GET /public/echo' }) do
    local median, min, p90 = median_round_trip(args, 50)
    say(string.format('# round trip :TokenRelay request %s -> buffer: median %.1f ms, min %.1f, p90 %.1f (n=50)', args, median, min, p90))
  end
  -- The same path without HTTP: the editor, the pipe and the JSON-RPC layer only.
  local times = {}
  for _ = 1, 50 do
    local done = false
    local t0 = uv.hrtime()
    tokenrelay.call('ping', nil, function()
      done = true
    end)
    wait(10000, function()
      return done
    end, 'ping')
    table.insert(times, (uv.hrtime() - t0) / 1e6)
  end
  table.sort(times)
  say(string.format('# round trip ping (no HTTP): median %.2f ms, min %.2f, p90 %.2f (n=50)', times[25], times[1], times[45]))
end)

test('an auth-prompt is shown and its URL opened when chosen (the login UI)', function()
  -- The frame goes through the real decoding and dispatch; vim.ui.select answers as a user would.
  local opened, asked = {}, nil
  local select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    asked = { items = items, prompt = opts.prompt }
    on_choice(items[1])
  end
  local options = tokenrelay.options()
  tokenrelay.setup(vim.tbl_extend('force', options, {
    open_url = function(url)
      table.insert(opened, url)
    end,
  }))
  local ok, err = pcall(function()
    local conn = assert(tokenrelay.start())
    local before = #notified
    conn:_on_stdout({
      vim.json.encode({
        jsonrpc = '2.0',
        method = 'auth-prompt',
        params = {
          environment = 'stack',
          profile = 'tv',
          kind = 'device',
          url = 'http://127.0.0.1:1/device',
          userCode = 'WDJB-MJHT',
          verificationUriComplete = 'http://127.0.0.1:1/device?user_code=WDJB-MJHT',
          expiresAt = '2026-12-01T12:00:00Z',
        },
      }),
      '',
    })
    wait(5000, function()
      return #opened == 1
    end, 'the URL to open')
    eq(opened[1], 'http://127.0.0.1:1/device?user_code=WDJB-MJHT', 'opened URL')
    eq(asked.items[1], 'Open in browser', 'first choice')
    local shown = notified[before + 1].msg
    truthy(shown:find('open http://127.0.0.1:1/device and enter the code WDJB-MJHT', 1, true), 'message: ' .. shown)
  end)
  vim.ui.select = select
  tokenrelay.setup(options)
  assert(ok, err)
end)

test('a login-required session-changed says log in to ENV/PROFILE, with the login when one is under way', function()
  local opened = {}
  local select = vim.ui.select
  vim.ui.select = function(items, _, on_choice)
    on_choice(items[1])
  end
  local options = tokenrelay.options()
  tokenrelay.setup(vim.tbl_extend('force', options, {
    open_url = function(url)
      table.insert(opened, url)
    end,
  }))
  local ok, err = pcall(function()
    local conn = assert(tokenrelay.start())
    local watched, werr = tokenrelay.call_sync('watch-sessions', {}, 30000)
    truthy(watched and type(watched.sessions) == 'table', 'watch-sessions answer: ' .. vim.inspect(werr or watched))
    local before = #notified
    local function changed(params)
      conn:_on_stdout({ vim.json.encode({ jsonrpc = '2.0', method = 'session-changed', params = params }), '' })
    end
    changed({ environment = 'stack', profile = 'svc', state = 'valid', reason = 'valid' })
    changed({ environment = 'stack', profile = 'me', state = 'interaction_required', reason = 'login-required' })
    wait(5000, function()
      return #notified > before
    end, 'the login-required message')
    eq(#notified, before + 1, 'only the login-required change is shown')
    local shown = notified[before + 1].msg
    truthy(shown:find('log in to stack/me', 1, true), 'message: ' .. shown)
    changed({
      environment = 'stack',
      profile = 'me',
      state = 'interaction_required',
      reason = 'login-required',
      login = { kind = 'browser', url = 'http://127.0.0.1:1/authorize?state=s', expiresAt = '2026-12-01T12:00:00Z' },
    })
    wait(5000, function()
      return #opened == 1
    end, 'the login URL to open')
    eq(opened[1], 'http://127.0.0.1:1/authorize?state=s', 'opened URL')
    truthy(notified[before + 2].msg:find('log in to stack/me: open http://127.0.0.1:1/authorize?state=s', 1, true), notified[before + 2].msg)
    local unwatched = tokenrelay.call_sync('unwatch-sessions', {}, 30000)
    eq(unwatched and unwatched.unwatched, true, 'unwatch-sessions')
  end)
  vim.ui.select = select
  tokenrelay.setup(options)
  assert(ok, err)
end)

test('login with a device code: auth-prompt, approval in the browser, then requests as the person', function()
  local info = truthy(tokenrelay.info(20000), 'no initialize result')
  if not vim.tbl_contains(info.capabilities.methods, 'login') then
    say('# skip: this tokenrelay has no login method (login is untested)')
    return
  end
  local prompts, approver_exit = {}, nil
  local options = tokenrelay.options()
  tokenrelay.setup(vim.tbl_extend('force', options, {
    on_auth_prompt = function(prompt)
      table.insert(prompts, prompt)
      -- What the person does: sign in at the AS, enter the code, accept.
      vim.fn.jobstart({ 'python3', here .. '/approve_device.py', stack.AS_URL, prompt.userCode }, {
        on_exit = function(_, code)
          approver_exit = code
        end,
      })
    end,
  }))
  local ok, err = pcall(function()
    local done, login_err, result
    tokenrelay.login({ environment = 'stack', profile = 'tv' }, function(e, r)
      done, login_err, result = true, e, r
    end)
    wait(90000, function()
      return done
    end, 'the login to finish')
    eq(login_err, nil, 'login error')
    eq(#prompts, 1, 'auth-prompts')
    eq(prompts[1].kind, 'device', 'prompt kind')
    truthy(prompts[1].url:find(stack.AS_URL, 1, true), 'prompt url ' .. tostring(prompts[1].url))
    eq(approver_exit, 0, 'approve_device.py exit')
    eq(result.loggedIn, true, 'loggedIn')
    local whoami = tokenrelay.request_sync({ path = '/whoami', profile = 'tv' }, 30000)
    eq(whoami.status, 200, 'status as the person')
    eq(whoami.json.username, 'alice', 'username')
    eq(whoami.json.client_id, 'tv', 'client_id')
    record({ '', ":lua require('tokenrelay').login({ profile = 'tv' })", 'auth-prompt: ' .. vim.json.encode(prompts[1]), 'result: ' .. vim.json.encode(result) })
  end)
  tokenrelay.setup(options)
  assert(ok, err)
end)

test('shutdown exits with code 0', function()
  truthy(tokenrelay.info(20000), 'no initialize result')
  local pid = tokenrelay.pid()
  eq(tokenrelay.stop(5000), 0, 'exit code')
  eq(tokenrelay.pid(), nil, 'pid after stop')
  eq(vim.fn.isdirectory('/proc/' .. pid), 0, 'process gone')
end)

test('VimLeavePre stops a running process with code 0', function()
  local response = tokenrelay.request_sync({ path = '/whoami' }, 30000) -- starts a new process
  eq(response.status, 200, 'status')
  local pid = tokenrelay.pid()
  vim.cmd('doautocmd VimLeavePre')
  eq(tokenrelay.pid(), nil, 'pid after VimLeavePre')
  eq(tokenrelay.stop(), 0, 'exit code')
  eq(vim.fn.isdirectory('/proc/' .. pid), 0, 'process gone')
end)

test('no secret or token in any buffer, message, notification or the stderr capture', function()
  local haystacks = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    table.insert(haystacks, { 'buffer ' .. vim.api.nvim_buf_get_name(buf), table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n') })
  end
  table.insert(haystacks, { 'messages', vim.fn.execute('messages') })
  for _, n in ipairs(notified) do
    table.insert(haystacks, { 'notification', n.msg })
  end
  local stderr = tokenrelay.stderr()
  truthy(#stderr > 0, 'no stderr captured: the canary would prove nothing')
  table.insert(haystacks, { 'stderr', table.concat(stderr, '\n') })
  local needles = { secret }
  local tokens = vim.fn.systemlist({ 'python3', repo .. '/scripts/interop/count_tokens.py', '--state', stack.STATE_DIR, '--kind', 'all', '--values' })
  eq(vim.v.shell_error, 0, 'count_tokens.py exit')
  truthy(#tokens > 0, 'no issued tokens listed')
  vim.list_extend(needles, tokens)
  for _, h in ipairs(haystacks) do
    for _, needle in ipairs(needles) do
      if needle ~= '' and h[2]:find(needle, 1, true) then
        error('a secret or token appears in ' .. h[1])
      end
    end
  end
end)

local v = vim.version()
test(string.format('nothing was deprecated on this Neovim (%d.%d.%d)', v.major, v.minor, v.patch), function()
  for _, n in ipairs(notified) do
    truthy(not tostring(n.msg):lower():find('deprecat'), 'a deprecation notice: ' .. tostring(n.msg))
  end
  local messages = vim.fn.execute('messages')
  truthy(not messages:lower():find('deprecat'), 'a deprecation message: ' .. messages)
end)

if vim.env.TOKENRELAY_TRANSCRIPT and vim.env.TOKENRELAY_TRANSCRIPT ~= '' then
  vim.fn.writefile(transcript, vim.env.TOKENRELAY_TRANSCRIPT)
end
vim.fn.delete(dir, 'rf')
finish()

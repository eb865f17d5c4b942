-- :TokenRelay {subcommand} ...: parsing, completion, and the scratch buffers results go to.

local tokenrelay = require('tokenrelay')

local M = {}

-- vim.islist is 0.10+; vim.tbl_islist (deprecated there) is what 0.7 has.
local islist = vim.islist or vim.tbl_islist

local function notify(msg, level)
  vim.notify('tokenrelay: ' .. msg, level or vim.log.levels.INFO)
end

-- JSON with sorted keys and two-space indent, for showing bodies and results.
local function pretty(value, indent)
  indent = indent or ''
  local t = type(value)
  if value == nil or value == vim.NIL then
    return 'null'
  elseif t == 'table' then
    local inner = indent .. '  '
    if getmetatable(value) ~= getmetatable(vim.empty_dict()) and islist(value) then
      if #value == 0 then
        return '[]'
      end
      local items = {}
      for _, v in ipairs(value) do
        table.insert(items, inner .. pretty(v, inner))
      end
      return '[\n' .. table.concat(items, ',\n') .. '\n' .. indent .. ']'
    end
    local keys = vim.tbl_keys(value)
    if #keys == 0 then
      return '{}'
    end
    table.sort(keys, function(a, b)
      return tostring(a) < tostring(b)
    end)
    local items = {}
    for _, k in ipairs(keys) do
      table.insert(items, inner .. vim.json.encode(tostring(k)) .. ': ' .. pretty(value[k], inner))
    end
    return '{\n' .. table.concat(items, ',\n') .. '\n' .. indent .. '}'
  end
  return (vim.json.encode(value):gsub('\\/', '/'))
end
M.pretty = pretty

local buffers = {}

-- A scratch buffer called `name`, created once and shown in a split when not visible.
local function scratch(name, show)
  local buf = buffers[name]
  if not (buf and vim.api.nvim_buf_is_valid(buf)) then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].bufhidden = 'hide'
    vim.bo[buf].swapfile = false
    buffers[name] = buf
  end
  if show ~= false and vim.fn.bufwinid(buf) == -1 then
    vim.cmd('botright split')
    vim.api.nvim_win_set_buf(0, buf)
  end
  return buf
end

local function set_lines(buf, lines)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
end

local function append_lines(buf, lines)
  if not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  vim.bo[buf].modifiable = true
  local last = vim.api.nvim_buf_line_count(buf)
  local first = vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1]
  if last == 1 and first == '' then
    vim.api.nvim_buf_set_lines(buf, 0, 1, false, lines)
  else
    vim.api.nvim_buf_set_lines(buf, last, last, false, lines)
  end
  vim.bo[buf].modifiable = false
end

local function split_lines(text)
  return vim.split(text, '\n', { plain = true })
end

--- The lines :TokenRelay request shows for a response.
function M.response_lines(params, response)
  local target = (params.method or 'GET') .. ' ' .. (params.path or params.url or '?')
  local lines = {
    string.format('%s -> %d  (%.0f ms)', target, response.status, tonumber(response.elapsedMs) or 0),
  }
  local names = vim.tbl_keys(response.headers or {})
  table.sort(names)
  for _, name in ipairs(names) do
    local v = response.headers[name]
    if type(v) == 'table' then
      for _, item in ipairs(v) do
        table.insert(lines, name .. ': ' .. tostring(item))
      end
    else
      table.insert(lines, name .. ': ' .. tostring(v))
    end
  end
  table.insert(lines, '')
  if response.json ~= nil then
    vim.list_extend(lines, split_lines(pretty(response.json)))
  elseif response.text ~= nil then
    vim.list_extend(lines, split_lines(response.text))
  elseif response.base64 ~= nil then
    table.insert(lines, string.format('(binary body, %d base64 characters)', #response.base64))
  end
  return lines
end

-- Parses "[METHOD] PATH [--env=E] [--profile=P] [--no-auth] [BODY...]" (the body is the raw
-- rest of the line: JSON when it starts with { or [, else text).
function M.parse_request(rest)
  local params = {}
  local token
  token, rest = rest:match('^%s*(%S+)(.*)$')
  if token and token:match('^%u+$') then
    params.method = token
    token, rest = (rest or ''):match('^%s*(%S+)(.*)$')
  end
  if not token then
    return nil, 'usage: :TokenRelay request [METHOD] PATH|URL [--env=E] [--profile=P] [--no-auth] [BODY]'
  end
  if token:match('^https?://') then
    params.url = token
  else
    params.path = token
  end
  while true do
    local flag, after = (rest or ''):match('^%s*(%-%-%S+)(.*)$')
    if not flag then
      break
    end
    local name, value = flag:match('^%-%-([%w-]+)=(.*)$')
    if name == 'env' then
      params.environment = value
    elseif name == 'profile' then
      params.profile = value
    elseif flag == '--no-auth' then
      params.auth = false
    else
      return nil, 'unknown option ' .. flag
    end
    rest = after
  end
  local body = vim.trim(rest or '')
  if body ~= '' then
    if body:match('^[%[{]') then
      local ok, decoded = pcall(vim.json.decode, body)
      if not ok then
        return nil, 'the body is not valid JSON: ' .. tostring(decoded)
      end
      params.json = decoded
    else
      params.text = body
    end
  end
  return params
end

local function flags(rest)
  local opts = {}
  for token in (rest or ''):gmatch('%S+') do
    local name, value = token:match('^%-%-([%w-]+)=(.*)$')
    if name == 'env' then
      opts.environment = value
    elseif name == 'profile' then
      opts.profile = value
    elseif token == '--all' then
      opts.all = true
    else
      return nil, 'unknown argument ' .. token
    end
  end
  return opts
end

local function show_error(what, err)
  notify(what .. ' failed: ' .. tostring(err), vim.log.levels.ERROR)
end

local subcommands = {}

function subcommands.request(rest)
  local params, perr = M.parse_request(rest)
  if not params then
    return notify(perr, vim.log.levels.ERROR)
  end
  local started = (vim.uv or vim.loop).hrtime()
  tokenrelay.request(params, function(err, response)
    local elapsed_ms = ((vim.uv or vim.loop).hrtime() - started) / 1e6
    local buf = scratch('tokenrelay://response')
    if err then
      set_lines(buf, { (params.method or 'GET') .. ' ' .. (params.path or params.url) .. ' failed', tostring(err) })
      show_error('request', err)
    else
      set_lines(buf, M.response_lines(params, response))
    end
    tokenrelay._set_last_response({ params = params, response = response, err = err, elapsed_ms = elapsed_ms })
    vim.cmd('doautocmd <nomodeline> User TokenRelayResponse')
  end)
end

--- The lines :TokenRelay status shows.
function M.status_lines(status, info)
  local lines = {}
  if info and info.serverInfo then
    table.insert(lines, string.format('tokenrelay %s (protocol %s), pid %s', info.serverInfo.version, info.protocolVersion, tostring(tokenrelay.pid())))
  end
  table.insert(lines, string.format('%-12s %-12s %-20s %-10s %-24s %-5s %s', 'ENVIRONMENT', 'PROFILE', 'TYPE', 'STATE', 'EXPIRES', 'REFR', 'REQUESTS  LAST ERROR'))
  lines[#lines] = lines[#lines]:gsub('%s+$', '')
  for _, s in ipairs(status.sessions or {}) do
    local counters = s.counters or {}
    local line = string.format(
        '%-12s %-12s %-20s %-10s %-24s %-5s %-9s %s',
        s.environment,
        s.profile,
        s.type,
        s.state,
        (s.expiresAt ~= nil and s.expiresAt ~= vim.NIL) and s.expiresAt or '-',
        s.refreshable and 'yes' or 'no',
        tostring(counters.requests or 0),
        (type(s.lastError) == 'table') and (s.lastError.kind .. ': ' .. s.lastError.message) or ''
      )
    table.insert(lines, (line:gsub('%s+$', '')))
  end
  table.insert(lines, string.format('subscriptions: %d', status.subscriptions or 0))
  return lines
end

function subcommands.status()
  tokenrelay.status(function(err, status)
    if err then
      return show_error('status', err)
    end
    local buf = scratch('tokenrelay://status')
    set_lines(buf, M.status_lines(status, tokenrelay.info()))
    vim.cmd('doautocmd <nomodeline> User TokenRelayStatus')
  end)
end

local event_buffers = 0

function subcommands.subscribe(rest)
  local params, perr = M.parse_request(rest)
  if not params then
    return notify(perr, vim.log.levels.ERROR)
  end
  if params.method or params.json or params.text then
    return notify('subscribe takes PATH|URL [--env=E] [--profile=P] [--no-auth]', vim.log.levels.ERROR)
  end
  event_buffers = event_buffers + 1
  local buf = scratch(string.format('tokenrelay://events/%d %s', event_buffers, params.path or params.url))
  local sub
  sub = tokenrelay.subscribe(params, {
    on_event = function(ev)
      local lines = split_lines(ev.data or '')
      lines[1] = string.format('[%s] %s: %s', ev.id or '-', ev.event, lines[1])
      append_lines(buf, lines)
    end,
    on_state = function(s)
      local detail = s.status and (' ' .. s.status) or ''
      if type(s.error) == 'table' then
        detail = detail .. ' ' .. tostring(s.error.kind) .. ': ' .. tostring(s.error.message)
      end
      append_lines(buf, { string.format('-- %s%s (%s)', s.state, detail, sub and sub.id or '?') })
    end,
    on_error = function(err)
      append_lines(buf, { 'subscribe failed: ' .. tostring(err) })
      show_error('subscribe', err)
    end,
  })
  vim.api.nvim_create_autocmd({ 'BufWipeout', 'BufDelete' }, {
    buffer = buf,
    once = true,
    callback = function()
      sub:unsubscribe()
    end,
  })
  vim.b[buf].tokenrelay_subscription = true
  return sub
end

function subcommands.unsubscribe(rest)
  local which = vim.trim(rest or '')
  local n = 0
  for id, sub in pairs(tokenrelay.subscriptions()) do
    if which == '' or which == 'all' or which == id then
      sub:unsubscribe()
      n = n + 1
    end
  end
  notify(string.format('%d subscription(s) closed', n))
end

function subcommands.invalidate(rest)
  local opts, err = flags(rest)
  if not opts then
    return notify(err, vim.log.levels.ERROR)
  end
  tokenrelay.invalidate(opts, function(e, count)
    if e then
      return show_error('invalidate', e)
    end
    notify(string.format('%d session(s) invalidated', count or 0))
  end)
end

function subcommands.logout(rest)
  local opts, err = flags(rest)
  if not opts then
    return notify(err, vim.log.levels.ERROR)
  end
  tokenrelay.logout(opts, function(e)
    if e then
      return show_error('logout', e)
    end
    notify('logged out')
  end)
end

function subcommands.login(rest)
  local opts, err = flags(rest)
  if not opts then
    return notify(err, vim.log.levels.ERROR)
  end
  notify('login started; follow the prompt')
  tokenrelay.login(opts, function(e)
    if e then
      return show_error('login', e)
    end
    notify('logged in')
  end)
end

function subcommands.log()
  local buf = scratch('tokenrelay://log')
  set_lines(buf, tokenrelay.stderr())
end

function subcommands.stop()
  local code = tokenrelay.stop()
  notify('stopped (exit ' .. tostring(code) .. ')')
end

function subcommands.restart()
  tokenrelay.stop()
  if tokenrelay.start() then
    notify('restarted')
  end
end

--- Runs `:TokenRelay {args}`.
function M.run(args)
  local name, rest = (args or ''):match('^%s*(%S+)(.*)$')
  local f = name and subcommands[name]
  if not f then
    local names = vim.tbl_keys(subcommands)
    table.sort(names)
    return notify('usage: :TokenRelay ' .. table.concat(names, '|') .. ' ...', vim.log.levels.ERROR)
  end
  return f(rest)
end

local methods = { 'GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS' }

--- Completion for :TokenRelay.
function M.complete(arglead, cmdline)
  local words = vim.split(vim.trim(cmdline), '%s+')
  local done = #words - (arglead ~= '' and 1 or 0) -- words before the one being typed
  local candidates
  if done <= 1 then
    candidates = vim.tbl_keys(subcommands)
    table.sort(candidates)
  elseif arglead:match('^%-%-env=') or arglead:match('^%-%-profile=') then
    candidates = {}
    local info = tokenrelay.info()
    for _, e in ipairs(info and info.environments or {}) do
      if arglead:match('^%-%-env=') then
        table.insert(candidates, '--env=' .. e.name)
      else
        for _, p in ipairs(e.profiles or {}) do
          table.insert(candidates, '--profile=' .. p.name)
        end
      end
    end
  elseif arglead:match('^%-') then
    candidates = { '--env=', '--profile=', '--no-auth', '--all' }
  elseif words[2] == 'request' and done == 2 then
    candidates = methods
  else
    candidates = {}
  end
  return vim.tbl_filter(function(c)
    return c:sub(1, #arglead) == arglead
  end, candidates)
end

return M

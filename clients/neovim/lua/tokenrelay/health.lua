-- :checkhealth tokenrelay: the binary, the config (tokenrelay check-config --json) and the
-- sessions (status), through the health API of the running Neovim.

local M = {}

-- 0.9+: vim.health.start/ok/...; 0.8: vim.health.report_*; 0.7: require('health').report_*.
local function reporter()
  local h = vim.health
  if h and h.start then
    return h
  end
  h = (h and h.report_start) and h or require('health')
  return { start = h.report_start, ok = h.report_ok, info = h.report_info, warn = h.report_warn, error = h.report_error }
end

-- Runs argv; returns exit code (nil on timeout), stdout, stderr.
local function run(argv, environ, timeout_ms)
  local out, err, code
  local opts = {
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = function(_, data)
      out = table.concat(data, '\n')
    end,
    on_stderr = function(_, data)
      err = table.concat(data, '\n')
    end,
    on_exit = function(_, c)
      code = c
    end,
  }
  if environ and next(environ) then
    opts.env = environ
  end
  local ok, job = pcall(vim.fn.jobstart, argv, opts)
  if not ok or job <= 0 then
    return nil, '', tostring(job)
  end
  vim.wait(timeout_ms, function()
    return code ~= nil and out ~= nil and err ~= nil
  end, 10)
  if code == nil then
    vim.fn.jobstop(job)
  end
  return code, out or '', err or ''
end

function M.check()
  local health = reporter()
  local tokenrelay = require('tokenrelay')
  local options = tokenrelay.options()
  health.start('tokenrelay')

  local bin = tokenrelay.binary_argv()
  local exe = vim.fn.exepath(bin[1])
  if exe == '' then
    health.error('tokenrelay binary not found: ' .. bin[1], {
      'put tokenrelay on PATH, set $TOKENRELAY_BIN, or pass cmd to setup()',
    })
    return
  end
  local version_argv = vim.deepcopy(bin)
  table.insert(version_argv, '--version')
  local code, out = run(version_argv, options.environ, 5000)
  if code ~= 0 then
    health.error(string.format('%s --version failed (exit %s)', exe, tostring(code)))
    return
  end
  health.ok(string.format('binary: %s (%s)', exe, vim.trim(out)))

  local check = vim.deepcopy(bin)
  vim.list_extend(check, { 'check-config', '--json' })
  if options.config then
    vim.list_extend(check, { '--config', vim.fn.expand(options.config) })
  end
  local stderr
  code, out, stderr = run(check, options.environ, 10000)
  local ok, diagnostics = pcall(vim.json.decode, out ~= '' and out or '[]')
  if not ok or type(diagnostics) ~= 'table' then
    diagnostics = {}
  end
  local where = options.config and vim.fn.expand(options.config) or '(default location)'
  if code == 0 then
    health.ok('config valid: ' .. where)
  elseif code == 1 then
    health.error('config invalid: ' .. where)
  else
    health.error(string.format('check-config failed (exit %s): %s', tostring(code), vim.trim(stderr or '')))
  end
  for _, d in ipairs(diagnostics) do
    local text = string.format('%s:%s:%s: %s', d.file, d.line, d.column, d.message)
    if d.severity == 'error' then
      health.error(text)
    else
      health.warn(text)
    end
  end
  if code ~= 0 then
    return
  end

  local status, err = tokenrelay.status_sync(10000)
  if not status then
    health.error('status failed: ' .. tostring(err))
    return
  end
  local info = tokenrelay.info(5000)
  if info and info.serverInfo then
    health.ok(string.format('running: pid %s, tokenrelay %s, protocol %s', tostring(tokenrelay.pid()), info.serverInfo.version, info.protocolVersion))
  end
  if #(status.sessions or {}) == 0 then
    health.warn('no sessions: the config has no environments with profiles')
  end
  for _, s in ipairs(status.sessions or {}) do
    local expires = (s.expiresAt ~= nil and s.expiresAt ~= vim.NIL) and (', expires ' .. s.expiresAt) or ''
    local text = string.format('session %s/%s (%s): %s%s, %d request(s)', s.environment, s.profile, s.type, s.state, expires, (s.counters or {}).requests or 0)
    if type(s.lastError) == 'table' then
      health.warn(text .. ', last error ' .. tostring(s.lastError.kind) .. ': ' .. tostring(s.lastError.message))
    else
      health.ok(text)
    end
  end
  health.info(string.format('subscriptions open: %d', status.subscriptions or 0))
end

return M

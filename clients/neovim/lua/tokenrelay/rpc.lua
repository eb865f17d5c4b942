-- One tokenrelay process and the JSON-RPC 2.0 conversation with it: newline-delimited JSON on
-- its stdin/stdout through jobstart(), answers matched to callbacks by id, notifications handed
-- to one dispatcher, stderr kept in a bounded ring for :checkhealth and :TokenRelay log.
--
-- Built on jobstart() rather than vim.lsp.rpc because (1) vim.lsp.rpc.start changed its
-- signature between releases (0.7: cmd, args, dispatchers, extra; 0.10: cmd, dispatchers,
-- extra) while jobstart() did not; (2) vim.lsp.rpc drops every -32800 answer (so a cancelled
-- request would never reach its callback) and writes the child's stderr to lsp.log at ERROR
-- level; (3) NDJSON framing on top of jobstart() is a dozen lines (below, on_stdout).

local M = {}

-- vim.islist is 0.10+; vim.tbl_islist (deprecated there) is what 0.7 has.
local islist = vim.islist or vim.tbl_islist

--- Extra milliseconds the client waits past a request's own timeoutMs before giving up.
M.TIMEOUT_SLACK_MS = 5000
--- Lines of the child's stderr kept (oldest dropped first).
M.STDERR_LINES = 200

local function is_null(v)
  return v == nil or v == vim.NIL
end

local Error = {}
Error.__index = Error
Error.__tostring = function(e)
  if e.code then
    return string.format('%s (%s, %d)', e.message, e.kind, e.code)
  end
  return string.format('%s (%s)', e.message, e.kind)
end

--- A JSON-RPC error, or a client-side failure (kind `timeout`, `closed`, `not_started`).
---@return table error {code?, message, kind, data?}
function M.error(kind, message, code, data)
  return setmetatable({ kind = kind, message = message, code = code, data = data }, Error)
end

local function from_wire_error(e)
  if type(e) ~= 'table' then
    return M.error('internal', 'malformed error: ' .. vim.inspect(e))
  end
  local data = not is_null(e.data) and e.data or nil
  local kind = data and type(data.kind) == 'string' and data.kind or 'unknown'
  return M.error(kind, tostring(e.message or 'error'), tonumber(e.code), data)
end

--- True for a table that must go on the wire as an object even when empty.
--- Lua cannot tell `{}` from `[]`; vim.json.encode(`{}`) gives `[]`, so every place the
--- protocol expects an object gets vim.empty_dict() when empty.
function M.object(t)
  if t == nil or t == vim.NIL then
    return nil
  end
  if type(t) == 'table' and next(t) == nil then
    return vim.empty_dict()
  end
  return t
end

-- Runs a caller's callback; an error in it is reported and never stops the reading of the
-- frames that follow in the same chunk.
local function protected(f, ...)
  local args = { n = select('#', ...), ... }
  local ok, err = xpcall(function()
    return f((table.unpack or unpack)(args, 1, args.n))
  end, debug.traceback)
  if not ok then
    vim.schedule(function()
      vim.notify('tokenrelay: error in a callback: ' .. tostring(err), vim.log.levels.ERROR)
    end)
  end
end

local Conn = {}
Conn.__index = Conn

--- Starts `argv` (a list) and returns a connection, or nil and an error.
---@param opts table {argv, environ?, on_notification?(method, params), on_exit?(code), on_stderr?(line)}
function M.spawn(opts)
  local argv = opts.argv
  if vim.fn.executable(argv[1]) ~= 1 then
    return nil, M.error('not_started', 'tokenrelay binary not found: ' .. tostring(argv[1]))
  end
  local self = setmetatable({
    argv = argv,
    next_id = 1,
    pending = {},
    in_flight = 0,
    partial = '',
    err_partial = '',
    stderr = {},
    exit_code = nil,
    on_notification = opts.on_notification or function() end,
    on_exit = opts.on_exit or function() end,
    on_stderr = opts.on_stderr or function() end,
  }, Conn)
  local job_opts = {
    on_stdout = function(_, data)
      self:_on_stdout(data)
    end,
    on_stderr = function(_, data)
      self:_on_stderr(data)
    end,
    on_exit = function(_, code)
      self:_on_exit(code)
    end,
  }
  if opts.environ and next(opts.environ) then
    job_opts.env = opts.environ
  end
  local ok, job = pcall(vim.fn.jobstart, argv, job_opts)
  if not ok or job <= 0 then
    return nil, M.error('not_started', 'could not start ' .. tostring(argv[1]) .. ': ' .. tostring(job))
  end
  self.job = job
  self.pid = vim.fn.jobpid(job)
  return self
end

--- True while the process runs.
function Conn:running()
  return self.exit_code == nil
end

-- jobstart() hands over lines split at "\n": the first item continues the previous partial
-- line, the last item is the start of the next one ('' after a complete line); {''} is EOF.
function Conn:_on_stdout(data)
  local eof = #data == 1 and data[1] == ''
  data[1] = self.partial .. data[1]
  self.partial = eof and '' or table.remove(data)
  for _, line in ipairs(data) do
    line = line:gsub('\r$', '')
    if line ~= '' then
      self:_on_line(line)
    end
  end
end

function Conn:_on_stderr(data)
  local eof = #data == 1 and data[1] == ''
  data[1] = self.err_partial .. data[1]
  self.err_partial = eof and '' or table.remove(data)
  for _, line in ipairs(data) do
    line = line:gsub('\r$', '')
    if line ~= '' then
      table.insert(self.stderr, line)
      if #self.stderr > M.STDERR_LINES then
        table.remove(self.stderr, 1)
      end
      self.on_stderr(line)
    end
  end
end

function Conn:_on_line(line)
  local ok, decoded = pcall(vim.json.decode, line)
  if not ok or type(decoded) ~= 'table' then
    self:_on_stderr({ 'tokenrelay.nvim: unreadable frame from tokenrelay: ' .. line:sub(1, 200), '' })
    return
  end
  if islist(decoded) and decoded[1] ~= nil then
    for _, message in ipairs(decoded) do
      self:_on_message(message)
    end
  else
    self:_on_message(decoded)
  end
end

function Conn:_on_message(message)
  if type(message) ~= 'table' then
    return
  end
  local method, id = message.method, message.id
  if type(method) == 'string' then
    local params = not is_null(message.params) and message.params or {}
    if is_null(id) then
      protected(self.on_notification, method, params)
    else
      -- tokenrelay sends no requests; answer as JSON-RPC requires.
      self:_send({ jsonrpc = '2.0', id = id, error = { code = -32601, message = 'method not found: ' .. method } })
    end
    return
  end
  local entry = self.pending[id]
  if not entry then
    return -- an answer to a request the caller gave up on
  end
  self:_settle(id)
  if not is_null(message.error) then
    protected(entry.callback, from_wire_error(message.error), nil)
  else
    local result = message.result
    protected(entry.callback, nil, not is_null(result) and result or nil)
  end
end

function Conn:_settle(id)
  local entry = self.pending[id]
  if entry then
    self.pending[id] = nil
    self.in_flight = self.in_flight - 1
    if entry.timer then
      entry.timer:stop()
      entry.timer:close()
    end
  end
  return entry
end

function Conn:_on_exit(code)
  self.exit_code = code
  local closed = M.error('closed', string.format('tokenrelay exited with status %d', code))
  local ids = vim.tbl_keys(self.pending)
  table.sort(ids)
  for _, id in ipairs(ids) do
    local entry = self:_settle(id)
    protected(entry.callback, closed, nil)
  end
  self.on_exit(code)
end

function Conn:_send(message)
  if not self:running() then
    return false
  end
  local ok = pcall(vim.fn.chansend, self.job, vim.json.encode(message) .. '\n')
  return ok
end

--- Sends a request; `callback(err, result)` runs once. Returns the request id.
--- `opts.timeout_ms`: the client gives up then (err kind `timeout`) and cancels on the server.
function Conn:request(method, params, callback, opts)
  opts = opts or {}
  local id = self.next_id
  self.next_id = id + 1
  if not self:running() then
    callback(M.error('closed', 'tokenrelay is not running'), nil)
    return id
  end
  local entry = { method = method, callback = callback }
  self.pending[id] = entry
  self.in_flight = self.in_flight + 1
  if opts.timeout_ms then
    local timer = (vim.uv or vim.loop).new_timer()
    entry.timer = timer
    timer:start(
      opts.timeout_ms,
      0,
      vim.schedule_wrap(function()
        if self.pending[id] == entry then
          self:_settle(id)
          self:notify('$/cancelRequest', { id = id })
          callback(M.error('timeout', string.format('no answer to %s within %d ms; cancelled', method, opts.timeout_ms)), nil)
        end
      end)
    )
  end
  local message = { jsonrpc = '2.0', id = id, method = method }
  if params ~= nil then
    message.params = M.object(params)
  end
  if not self:_send(message) then
    self:_settle(id)
    callback(M.error('closed', 'tokenrelay is not accepting input'), nil)
  end
  return id
end

--- Sends a notification (no answer).
function Conn:notify(method, params)
  local message = { jsonrpc = '2.0', method = method }
  if params ~= nil then
    message.params = M.object(params)
  end
  return self:_send(message)
end

--- Asks the server to cancel request `id`; its callback then gets kind `cancelled`.
function Conn:cancel(id)
  if self.pending[id] then
    self:notify('$/cancelRequest', { id = id })
  end
end

--- Waits up to `timeout_ms` for `request` to answer. Returns result, err.
function Conn:request_sync(method, params, timeout_ms)
  local done, err, result = false, nil, nil
  local id = self:request(method, params, function(e, r)
    done, err, result = true, e, r
  end)
  if not vim.wait(timeout_ms, function()
    return done
  end, 5) then
    self:_settle(id)
    self:notify('$/cancelRequest', { id = id })
    return nil, M.error('timeout', string.format('no answer to %s within %d ms; cancelled', method, timeout_ms))
  end
  return result, err
end

--- `shutdown`, then `exit`, then SIGTERM; each bounded. Blocks; returns the exit code.
function Conn:stop(timeout_ms)
  timeout_ms = timeout_ms or 5000
  if self:running() then
    for id in pairs(self.pending) do
      self:notify('$/cancelRequest', { id = id })
    end
    self:request_sync('shutdown', nil, math.floor(timeout_ms / 2))
    self:notify('exit')
    pcall(vim.fn.chanclose, self.job, 'stdin')
    local code = vim.fn.jobwait({ self.job }, math.floor(timeout_ms / 2))[1]
    if code == -1 then
      vim.fn.jobstop(self.job)
      code = vim.fn.jobwait({ self.job }, 1000)[1]
    end
    if code >= 0 and self.exit_code == nil then
      -- jobwait() reaped it; on_exit may run later, after this returns.
      self.exit_code = code
    end
  end
  return self.exit_code
end

return M

-- Captures the frames Neovim's own LSP client (vim.lsp.start_client, lsp.lua + lsp/rpc.lua)
-- sends to a server: initialize, initialized, shutdown, exit. Run by capture.sh:
--   TOKENRELAY_BIN=... CAPTURE_OUT=frames.bin nvim --headless -u NONE -c 'luafile neovim.lua'
-- The server command tees its stdin into CAPTURE_OUT, then execs the real binary.
local out = assert(os.getenv('CAPTURE_OUT'), 'CAPTURE_OUT')
local bin = assert(os.getenv('TOKENRELAY_BIN'), 'TOKENRELAY_BIN')
local root = assert(os.getenv('CAPTURE_ROOT'), 'CAPTURE_ROOT')
local initialized = false
local exited = nil
local id = vim.lsp.start_client({
  name = 'tokenrelay',
  cmd = { 'bash', '-c', 'exec "$1" serve < <(tee "$0")', out, bin },
  root_dir = root,
  on_init = function() initialized = true end,
  on_exit = function(code) exited = code end,
})
assert(id, 'start_client failed')
assert(vim.wait(20000, function() return initialized end, 20), 'initialize did not complete')
vim.lsp.stop_client(id)
assert(vim.wait(20000, function() return exited ~= nil end, 20), 'the server did not exit')
io.stderr:write('server exit code ' .. tostring(exited) .. '\n')
vim.cmd(exited == 0 and 'qall!' or 'cquit!')

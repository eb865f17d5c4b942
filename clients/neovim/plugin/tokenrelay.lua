-- tokenrelay for Neovim: the :TokenRelay command and the VimLeavePre hook. The module
-- (lua/tokenrelay) loads on first use; the process starts on the first call.
if vim.g.loaded_tokenrelay then
  return
end
vim.g.loaded_tokenrelay = 1

if vim.fn.has('nvim-0.7') ~= 1 then
  vim.api.nvim_err_writeln('tokenrelay.nvim needs Neovim 0.7 or later')
  return
end

vim.api.nvim_create_user_command('TokenRelay', function(opts)
  require('tokenrelay').command(opts.args)
end, {
  nargs = '+',
  desc = 'tokenrelay: request, status, subscribe, unsubscribe, invalidate, logout, login, log, stop, restart',
  complete = function(arglead, cmdline)
    return require('tokenrelay').complete(arglead, cmdline)
  end,
})

local group = vim.api.nvim_create_augroup('tokenrelay', { clear = true })
vim.api.nvim_create_autocmd('VimLeavePre', {
  group = group,
  callback = function()
    local loaded = package.loaded['tokenrelay']
    if loaded then
      loaded._on_vim_leave()
    end
  end,
})

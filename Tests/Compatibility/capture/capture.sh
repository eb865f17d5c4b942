#!/usr/bin/env bash
# Re-captures the frames the editors' own JSON-RPC clients send, from the real editors
# (Debian's neovim 0.7.2; emacs-nox 28.2 with elpa-eglot 1.9 on its built-in jsonrpc.el:
# apt-get install neovim emacs-nox elpa-eglot), into Tests/Compatibility/frames/. The
# compatibility suite replays these files; CI does not need the editors.
#   Tests/Compatibility/capture/capture.sh [path/to/tokenrelay]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
frames=$here/../frames
bin=$(realpath "${1:-$here/../../../.build/debug/tokenrelay}")
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
export TOKENRELAY_BIN=$bin CAPTURE_ROOT=$root
nvim_version=$(nvim --version | sed -n '1s/^NVIM v//p')
CAPTURE_OUT=$frames/neovim-$nvim_version.lsp nvim --headless -u NONE -c "luafile $here/neovim.lua"
eglot_version=$(emacs --batch --eval '(progn (package-initialize) (require (quote eglot)) (princ (package-desc-version (cadr (assq (quote eglot) package-alist)))))' 2>/dev/null | tr -d '()' | tr ' ' .)
CAPTURE_OUT=$frames/eglot-$eglot_version.lsp emacs --batch -l "$here/eglot.el"
ls -l "$frames"

#!/usr/bin/env bash
# Runs the tokenrelay.nvim suite in headless Neovim against the interop stack named by
# TOKENRELAY_STACK_ENV, with private XDG dirs (tokenrelay's default session store, Neovim's
# state). Prints the suite's lines; the last is "N passed, N failed". Exit status 0 when all
# passed and the client secret appears nowhere in the output either. NVIM=PATH runs another
# Neovim than the one on PATH (scripts/test also runs the suite on a newer one).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -r "${TOKENRELAY_STACK_ENV:-}" ]; then
  echo "not ok - TOKENRELAY_STACK_ENV does not name a readable stack.env (scripts/interop/stack up)"
  echo "0 passed, 1 failed"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/tmp"
# TMPDIR too: Neovim keeps its nvim.USER folder there after it exits.
export HOME=$work/home XDG_CONFIG_HOME=$work/config XDG_STATE_HOME=$work/state XDG_DATA_HOME=$work/data \
  XDG_CACHE_HOME=$work/cache TMPDIR=$work/tmp
status=0
"${NVIM:-nvim}" --headless -u NONE -i NONE -c "luafile $here/run.lua" >"$work/out" 2>&1 || status=$?
"$here/canary.sh" "$work/out" "$status"

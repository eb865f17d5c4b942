#!/usr/bin/env bash
# Runs the tokenrelay.el suite in batch Emacs (ERT) against the interop stack named by
# TOKENRELAY_STACK_ENV, with a private home and XDG folders (tokenrelay's default session store;
# Emacs's own ~/.emacs.d, where native compilation keeps its eln-cache).
# Prints ERT's report; the last line is "N passed, N failed". Exit status 0 when all passed
# and the client secret appears nowhere in the output either.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -r "${TOKENRELAY_STACK_ENV:-}" ]; then
  echo "not ok - TOKENRELAY_STACK_ENV does not name a readable stack.env (scripts/interop/stack up)"
  echo "0 passed, 1 failed"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home"
export HOME=$work/home XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config XDG_CACHE_HOME=$work/cache \
  XDG_DATA_HOME=$work/data
status=0
emacs --batch -Q -l "$here/tokenrelay-test.el" -f ert-run-tests-batch-and-exit >"$work/out" 2>&1 || status=$?
"$here/../../neovim/test/canary.sh" "$work/out" "$status"

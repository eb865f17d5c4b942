#!/usr/bin/env bash
# Runs the tokenrelay.el suite in batch Emacs (ERT) against the interop stack named by
# TOKENRELAY_STACK_ENV, with a private XDG state dir (tokenrelay's default session store).
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
export XDG_STATE_HOME=$work/state HOME=${HOME:-$work}
status=0
emacs --batch -Q -l "$here/tokenrelay-test.el" -f ert-run-tests-batch-and-exit >"$work/out" 2>&1 || status=$?
"$here/../../neovim/test/canary.sh" "$work/out" "$status"

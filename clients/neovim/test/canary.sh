#!/usr/bin/env bash
# canary.sh OUTPUT STATUS: prints an editor suite's OUTPUT, then fails it if the interop
# stack's client secret appears in it (adjusting the closing "N passed, N failed" line).
# Exit status: STATUS, or 1 when the secret leaked. Shared by the Neovim and Emacs suites.
set -uo pipefail
out=$1 status=$2
secret=svc-secret
if [ -n "${TOKENRELAY_STACK_ENV:-}" ] && [ -r "$TOKENRELAY_STACK_ENV" ]; then
  # shellcheck source=/dev/null
  secret=$(set +u; . "$TOKENRELAY_STACK_ENV"; printf '%s' "${CLIENT_SECRET:-svc-secret}")
fi
if grep -qF -- "$secret" "$out"; then
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -1)
  grep -vE '^[0-9]+ passed, [0-9]+ failed$' "$out" | grep -vF -- "$secret"
  echo "not ok - the client secret appears in the editor's output"
  passed=${summary%% passed*} failed=${summary#*, } failed=${failed%% failed}
  echo "${passed:-0} passed, $(( ${failed:-0} + 1 )) failed"
  exit 1
fi
cat "$out"
grep -qE '^[0-9]+ passed, 0 failed$' "$out" || { [ "$status" -ne 0 ] || status=1; }
exit "$status"

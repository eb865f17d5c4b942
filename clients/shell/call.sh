#!/usr/bin/env bash
# One-shot requests with `tokenrelay call` (SPEC 3): prints the body; the exit code comes
# from the HTTP status class (see the main README), so it composes with `&&` and `set -e`.
#
#   ./call.sh GET /items --env staging                        # body, pretty-printed when JSON
#   ./call.sh GET /items --env staging --query limit=5 -H 'Accept: application/json'
#   ./call.sh POST /items --env staging --json '{"name":"x"}'
#   ./call.sh GET /me --env production --profile me -v        # -v: status and headers on stderr
#
# Usage: call.sh METHOD PATH [tokenrelay call options...]
# Plain `tokenrelay call ...` is all you need; this adds pretty-printing of JSON bodies.
set -uo pipefail
tokenrelay=${TOKENRELAY_BIN:-tokenrelay}
body=$(mktemp)
trap 'rm -f "$body"' EXIT
"$tokenrelay" call "$@" >"$body"
code=$?
if jq -e . "$body" >/dev/null 2>&1; then jq . "$body"; else cat "$body"; fi
exit "$code"

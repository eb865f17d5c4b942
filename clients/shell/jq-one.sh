#!/usr/bin/env bash
# One JSON-RPC request through a pipe: builds it with jq, prints the result as JSON.
# On an error, prints "error CODE KIND: MESSAGE" to stderr and exits 1.
#
#   ./jq-one.sh ping
#   ./jq-one.sh initialize
#   ./jq-one.sh request '{"environment":"staging","path":"/items","query":{"limit":5}}'
#   ./jq-one.sh token-invalidate '{"all":true}' --config ~/tokenrelay.yaml
#
# Usage: jq-one.sh METHOD [PARAMS_JSON] [tokenrelay options...]
# The binary is $TOKENRELAY_BIN, else tokenrelay on PATH. stdin EOF after the one request
# makes tokenrelay answer it, then exit 0 (SPEC 4.2), so no shutdown is needed.
set -euo pipefail
tokenrelay=${TOKENRELAY_BIN:-tokenrelay}
method=${1:?usage: jq-one.sh METHOD [PARAMS_JSON] [tokenrelay options...]}
params=${2:-null}
shift $(( $# < 2 ? $# : 2 ))

jq -nc --arg method "$method" --argjson params "$params" \
  '{jsonrpc: "2.0", id: 1, method: $method} + (if $params == null then {} else {params: $params} end)' \
  | "$tokenrelay" --framing ndjson "$@" \
  | jq -e 'if .error then (.error | "error \(.code) \(.data.kind // "?"): \(.message)\n" | halt_error(1)) else .result end'

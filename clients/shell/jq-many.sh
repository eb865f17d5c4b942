#!/usr/bin/env bash
# Several requests in one pipe. Answers may arrive in any order (requests run
# concurrently); they are matched back by id: one line per request, in request order,
# {"id":N,"result":...} or {"id":N,"error":...}.
#
#   ./jq-many.sh                           # initialize and ping
#   ./jq-many.sh /items /users/me          # initialize, then GET each path concurrently
#   ./jq-many.sh /items -- --env staging   # tokenrelay options after --
#
# Usage: jq-many.sh [PATH...] [-- tokenrelay options...]
set -euo pipefail
tokenrelay=${TOKENRELAY_BIN:-tokenrelay}
paths=()
while (( $# )); do
  if [[ $1 == -- ]]; then shift; break; fi
  paths+=("$1"); shift
done

{
  jq -nc '{jsonrpc: "2.0", id: 1, method: "initialize"}'
  if (( ${#paths[@]} == 0 )); then
    jq -nc '{jsonrpc: "2.0", id: 2, method: "ping"}'
  else
    id=2
    for path in "${paths[@]}"; do
      jq -nc --argjson id "$id" --arg path "$path" '{jsonrpc: "2.0", id: $id, method: "request", params: {path: $path}}'
      id=$((id + 1))
    done
  fi
  # The same could be sent as one batch: jq -sc . of the lines above gives one array,
  # and the answer is one array line too.
} | "$tokenrelay" --framing ndjson "$@" | jq -sc 'sort_by(.id)[] | {id} + (if .error then {error} else {result} end)'

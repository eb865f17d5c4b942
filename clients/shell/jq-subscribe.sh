#!/usr/bin/env bash
# A subscription over a pipe. tokenrelay ends its subscriptions at stdin EOF, so stdin
# must stay open: the relay runs as a bash coprocess, and this script holds its stdin
# until it is done, then unsubscribes, sends shutdown and exit, and closes it.
# Prints one JSON line per event: {"id":...,"event":...,"data":...}; state changes go to
# stderr. Ctrl-C (or SIGTERM) stops cleanly. MAX_EVENTS=N stops after N events.
#
#   ./jq-subscribe.sh /events --env staging
#   LAST_EVENT_ID=42 ./jq-subscribe.sh /events
#   ./jq-subscribe.sh /events | jq -r .data          # just the payloads
#
# Usage: jq-subscribe.sh PATH [tokenrelay options...]
# Exit: 0 when the stream ends or is stopped, 1 when subscribe fails.
set -euo pipefail
tokenrelay=${TOKENRELAY_BIN:-tokenrelay}
path=${1:?usage: jq-subscribe.sh PATH [tokenrelay options...]}
shift
max_events=${MAX_EVENTS:-0}

coproc RELAY { exec "$tokenrelay" --framing ndjson "$@"; }
# shellcheck disable=SC2153  # coproc RELAY sets RELAY_PID
relay_pid=$RELAY_PID
# Own copies of the coprocess's fds: bash closes RELAY[*] as soon as the process exits,
# and there may still be lines to read.
exec {relay_in}>&"${RELAY[1]}" {relay_out}<&"${RELAY[0]}"

send() { printf '%s\n' "$1" 1>&"$relay_in" 2>/dev/null || true; }

subscription=
stopping=0
stop() {
  (( stopping )) && return
  stopping=1
  if [[ -n $subscription ]]; then
    send "$(jq -nc --arg s "$subscription" '{jsonrpc: "2.0", id: 2, method: "unsubscribe", params: {subscription: $s}}')"
  fi
  send '{"jsonrpc":"2.0","id":3,"method":"shutdown"}'
  send '{"jsonrpc":"2.0","method":"exit"}'
  exec {relay_in}>&-
}
trap 'stop' INT TERM

send "$(jq -nc --arg path "$path" --arg last "${LAST_EVENT_ID:-}" \
  '{jsonrpc: "2.0", id: 1, method: "subscribe", params: ({path: $path} + (if $last == "" then {} else {lastEventId: $last} end))}')"

status=0
events=0
# One jq per line keeps the recipe readable; it classifies each message as a tab-separated tag.
while IFS= read -r line <&"$relay_out"; do
  tagged=$(jq -r '
    if .id == 1 then (if .error then "failed\t\(.error | "error \(.code) \(.data.kind // "?"): \(.message)")" else "subscribed\t\(.result.subscription)" end)
    elif .method == "event" then "event\t\(.params | del(.subscription) | tojson)"
    elif .method == "subscription-state" then "state\t\(.params.state)\t\(.params | del(.subscription) | tojson)"
    else "other\t\(tojson)" end' <<<"$line")
  IFS=$'\t' read -r tag rest <<<"$tagged"
  case $tag in
    subscribed) subscription=$rest ;;
    failed) printf '%s\n' "$rest" >&2; status=1; stop ;;
    event)
      (( stopping )) && continue
      printf '%s\n' "$rest"
      events=$((events + 1))
      if (( max_events > 0 && events >= max_events )); then stop; fi ;;
    state)
      printf 'state %s\n' "${rest#*$'\t'}" >&2
      if [[ ${rest%%$'\t'*} == closed && $stopping == 0 ]]; then subscription=; stop; fi ;;
    *) : ;;  # answers to unsubscribe/shutdown, other notifications
  esac
done
stop
wait "$relay_pid" 2>/dev/null || true
exit "$status"

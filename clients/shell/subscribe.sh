#!/usr/bin/env bash
# Follow an event stream with `tokenrelay subscribe` (SPEC 3): one JSON line per event until
# Ctrl-C / SIGTERM. This recipe prints `event: data` per event; reconnects and credential
# renewal happen inside tokenrelay.
#
#   ./subscribe.sh /events --env staging
#   ./subscribe.sh /events --env staging --last-event-id 42
#   tokenrelay subscribe /events --env staging | jq -r 'select(.event == "price") | .data'
#
# Usage: subscribe.sh PATH [tokenrelay subscribe options...]
set -euo pipefail
tokenrelay=${TOKENRELAY_BIN:-tokenrelay}
"$tokenrelay" subscribe "$@" | jq --unbuffered -r '"\(.event // "message"): \(.data)"'

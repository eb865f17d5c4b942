#!/usr/bin/env bash
# Runs the shell recipes and checks their output. The jq recipes run against the real
# binary ($TOKENRELAY_BIN or .build/debug/tokenrelay) and the fake server; `call` and
# `subscribe` run only when TOKENRELAY_STACK_ENV names the interop stack's variables file.
# Exit 0 when every test passed.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/../.." && pwd)
real=${TOKENRELAY_BIN:-$repo/.build/debug/tokenrelay}
fake=$repo/clients/python/tests/fake_tokenrelay.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every tokenrelay started here keeps its default session store in $work, never in ~/.local/state.
export XDG_STATE_HOME=$work/state
failures=0 passes=0 skips=0

ok() { passes=$((passes + 1)); printf 'ok   %s\n' "$1"; }
fail() { failures=$((failures + 1)); printf 'FAIL %s: %s\n' "$1" "$2"; }
skip() { skips=$((skips + 1)); printf 'skip %s: %s\n' "$1" "$2"; }
# check NAME COMMAND...: passes when COMMAND succeeds
check() { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name" "$*"; fi; }
# wait_for FILE PATTERN: bounded wait (10 s) until FILE has a line matching PATTERN
wait_for() { for _ in $(seq 100); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
gone() { ! kill -0 "$1" 2>/dev/null; }

if [[ -x $real ]]; then
  export TOKENRELAY_BIN=$real
  out=$("$here/jq-one.sh" ping 2>/dev/null); check "jq-one ping prints {}" test "$out" = "{}"
  out=$("$here/jq-one.sh" initialize 2>/dev/null | jq -r .serverInfo.name); check "jq-one initialize names the server" test "$out" = tokenrelay
  "$here/jq-one.sh" no-such-method >/dev/null 2>"$work/err"; rc=$?
  check "jq-one error exits 1" test "$rc" = 1
  check "jq-one error names the kind" grep -q 'error -32601 method_not_found' "$work/err"
  "$here/jq-one.sh" initialize '{"processId":"x"}' >/dev/null 2>"$work/err"
  check "jq-one invalid params names the pointer" grep -q 'invalid_params: .*/processId' "$work/err"
  out=$("$here/jq-many.sh" 2>/dev/null | jq -sc 'map(.id)'); check "jq-many answers every request in order" test "$out" = "[1,2]"
  out=$("$here/jq-many.sh" 2>/dev/null | jq -sc '.[1].result'); check "jq-many ping result" test "$out" = "{}"
  if "$here/jq-subscribe.sh" /events >"$work/out" 2>"$work/err"; then rc=0; else rc=$?; fi
  check "jq-subscribe reports a failed subscribe and exits 1 (real binary, no config)" test "$rc" = 1
  check "jq-subscribe prints the error" grep -q '^error -32[0-9]* [a-z_]*: ' "$work/err"
else
  skip "real-binary recipes" "no binary at $real (swift build)"
fi

export TOKENRELAY_BIN=$fake
"$here/jq-subscribe.sh" /sse/finite >"$work/out" 2>"$work/err"; rc=$?
check "jq-subscribe exits 0 when the stream ends" test "$rc" = 0
out=$(jq -sc 'map(.data)' "$work/out"); check "jq-subscribe prints each event" test "$out" = '["one","two\nlines","{\"path\": \"/sse/finite\"}"]'
check "jq-subscribe reports states on stderr" grep -q '^state {"state":"closed"' "$work/err"
out=$(MAX_EVENTS=2 "$here/jq-subscribe.sh" /sse 2>/dev/null | jq -sc 'map(.data)'); check "jq-subscribe MAX_EVENTS stops after N" test "$out" = '["one","two\nlines"]'
LAST_EVENT_ID=7 MAX_EVENTS=3 "$here/jq-subscribe.sh" /sse >"$work/out" 2>/dev/null
check "jq-subscribe sends LAST_EVENT_ID" grep -q 'lastEventId' "$work/out"

"$here/jq-subscribe.sh" /sse >"$work/out" 2>/dev/null &
script=$!
if wait_for "$work/out" '"three"\|"data":"{'; then
  child=$(pgrep -P "$script" | head -1)
  kill -TERM "$script"
  wait "$script"; rc=$?
  check "jq-subscribe stops cleanly on SIGTERM" test "$rc" = 0
  for _ in $(seq 100); do gone "${child:-0}" && break; sleep 0.1; done
  check "jq-subscribe leaves no relay process behind" gone "${child:-0}"
else
  kill -KILL "$script" 2>/dev/null; fail "jq-subscribe streams" "no event within 10 s"
fi

if [[ -n ${TOKENRELAY_STACK_ENV:-} && -x $real ]]; then
  export TOKENRELAY_BIN=$real
  { read -r config; read -r path; read -r sse_path; } < <(python3 "$repo/clients/python/tests/stack_config.py" "$work")
  export TOKENRELAY_CONFIG=$config
  "$here/call.sh" GET "$path" --env stack >"$work/out" 2>"$work/err"; rc=$?
  check "call.sh GET succeeds against the stack" test "$rc" = 0
  check "call.sh prints the body" test -s "$work/out"
  "$here/call.sh" GET "$path" --env nope >/dev/null 2>&1; rc=$?
  check "call.sh fails for an unknown environment" test "$rc" != 0
  "$here/subscribe.sh" "$sse_path" --env stack >"$work/out" 2>/dev/null &
  script=$!
  check "subscribe.sh prints events" wait_for "$work/out" ':'
  kill -TERM "$script" $(pgrep -P "$script") 2>/dev/null; wait "$script" 2>/dev/null
  MAX_EVENTS=2 "$here/jq-subscribe.sh" "$sse_path" --env stack >"$work/out" 2>/dev/null; rc=$?
  check "jq-subscribe against the stack" test "$rc" = 0 -a "$(wc -l <"$work/out")" = 2
  out=$("$here/jq-one.sh" request "$(jq -nc --arg p "$path" '{environment: "stack", path: $p}')" | jq .status)
  check "jq-one request gets 200" test "$out" = 200
  # Logging in as a person (the README's recipe): tokenrelay login prints the URL and the
  # device code on stderr; approve_device.py plays the person at the real AS.
  "$here/call.sh" GET "$path" --env stack --profile tv >/dev/null 2>&1; rc=$?
  check "call.sh before login exits 8 (interaction required)" test "$rc" = 8
  "$real" login --env stack --profile tv --no-browser 2>"$work/login-err" &
  login=$!
  if wait_for "$work/login-err" 'enter the code'; then
    code=$(sed -n 's/.*enter the code: *\([^ ]*\).*/\1/p' "$work/login-err" | head -1)
    as_url=$(bash -c 'set -a; . "$1"; printf %s "$AS_URL"' bash "$TOKENRELAY_STACK_ENV")
    python3 "$repo/clients/neovim/test/approve_device.py" "$as_url" "$code"; rc=$?
    check "the person approves the code shown on stderr" test "$rc" = 0
    wait "$login"; rc=$?
    check "tokenrelay login exits 0 once the session is stored" test "$rc" = 0
    "$here/call.sh" GET "$path" --env stack --profile tv >"$work/out" 2>/dev/null; rc=$?
    check "call.sh after login runs as the person" test "$rc" = 0 -a "$(jq -r .username "$work/out")" = alice
  else
    kill "$login" 2>/dev/null; fail "tokenrelay login prompts" "no code on stderr: $(cat "$work/login-err")"
  fi
else
  skip "call.sh, subscribe.sh and stack recipes" "TOKENRELAY_STACK_ENV is not set"
fi

printf '%d passed, %d failed, %d skipped\n' "$passes" "$failures" "$skips"
(( failures == 0 ))

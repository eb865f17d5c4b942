#!/usr/bin/env python3
"""Session-store benchmarks (issue 13), standard library only.

  store_bench.py --binary PATH [--work DIR] [--calls 100] [--procs 4] [--requests 1000] [--ttl 2]

1. `tokenrelay call GET /whoami` --calls times with a valid token in the shared store, against
   `curl` with that token given (-H Authorization), same resource server, interleaved
   (call_bench.compare): median time per call.
2. --procs `tokenrelay serve` processes sending --requests requests each (one at a time) with
   --ttl second access tokens, all on one store: token calls at the authorization server per
   token lifetime (goal 1 across all processes, not one per process).

Prints one JSON object (the last line) with the figures; progress goes to stderr.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from call_bench import compare

REPO = Path(__file__).resolve().parent.parent.parent
STACK = REPO / "scripts/interop/stack"
COUNT = REPO / "scripts/interop/count_tokens.py"


def say(text):
    print(f"   store: {text}", file=sys.stderr, flush=True)


def stack_up(state, ttl, rs_cache):
    subprocess.run(
        [str(STACK), "up", "--state", str(state), "--access-ttl", str(ttl), "--rs-cache", str(rs_cache),
         "--watch-pid", str(os.getpid()), "--max-lifetime", "3600"],
        check=True, stdout=subprocess.DEVNULL)
    return json.loads((state / "stack.json").read_text())


def stack_down(state):
    subprocess.run([str(STACK), "down", "--state", str(state)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def issued(state):
    out = subprocess.run([sys.executable, str(COUNT), "--state", str(state), "--client", "svc"],
                         check=True, capture_output=True, text=True).stdout
    return int(out.strip())


def write_config(path, stack, skew, store=None):
    """A client-credentials profile `svc` against the stack; `store`: the config's `store:` value
    (default: a SQLite file beside the config)."""
    store = store or f"{{ type: sqlite, path: {path.parent / 'xdg' / 'sessions.db'} }}"
    path.write_text(f"""version: 1
store: {store}
environments:
  bench:
    base_url: {stack['RS_URL']}
    profiles:
      svc:
        type: client_credentials
        token_url: {stack['TOKEN_URL']}
        client_id: svc
        client_secret: {{ env: BENCH_SECRET }}
        scopes: [read]
        expiry_skew: {skew}
""")


def client_credentials_token(token_url):
    out = subprocess.run(
        ["curl", "-sf", "-u", "svc:svc-secret", "-d", "grant_type=client_credentials&scope=read", token_url],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)["access_token"]


def answer(process):
    """The next reply (notifications such as auth-failed are skipped)."""
    while True:
        message = json.loads(process.stdout.readline())
        if "id" in message:
            return message


def serve_load(binary, config, requests, env, results, index):
    process = subprocess.Popen([binary, "--config", str(config), "--log-level", "warn"], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ok = 0
    for number in range(requests):
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": number, "method": "request",
                                        "params": {"path": "/whoami"}}) + "\n")
        process.stdin.flush()
        if answer(process).get("result", {}).get("status") == 200:
            ok += 1
    process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": "s", "method": "status"}) + "\n")
    process.stdin.flush()
    status = answer(process)
    process.stdin.close()
    process.wait(timeout=60)
    counters = status["result"]["sessions"][0]["counters"]
    results[index] = {"ok": ok, "renewals": counters["renewals"] + counters["acquisitions"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--work")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--ttl", type=int, default=2)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="tokenrelay-store-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, BENCH_SECRET="svc-secret")
    result = {}

    calls_dir = work / "calls"
    calls_dir.mkdir(exist_ok=True)
    os.chmod(calls_dir, 0o700)
    stack = stack_up(calls_dir / "stack", 3600, 60)
    try:
        config = calls_dir / "config.yaml"
        write_config(config, stack, "30s")
        say(f"{args.calls} x tokenrelay call with a stored token vs curl with the token given")
        token = client_credentials_token(stack["TOKEN_URL"])
        relay, curl = compare([args.binary, "call", "GET", "/whoami", "--config", str(config)],
                              ["curl", "-sf", "-o", "/dev/null", "-H", f"Authorization: Bearer {token}",
                               stack["RS_URL"] + "/whoami"], args.calls, env)
        result.update({"call_ms": round(relay * 1000, 2), "curl_ms": round(curl * 1000, 2),
                       "call_vs_curl": round(relay / curl, 2),
                       "call_tokens_issued": issued(calls_dir / "stack") - 1})  # minus curl's own token
    finally:
        stack_down(calls_dir / "stack")

    load_dir = work / "load"
    load_dir.mkdir(exist_ok=True)
    os.chmod(load_dir, 0o700)
    stack = stack_up(load_dir / "stack", args.ttl, 0)
    try:
        config = load_dir / "config.yaml"
        # Renew 300 ms before expiry (the default margin, half the lifetime, would renew twice per
        # lifetime by design): the ideal is then one token call per renewal period (1.7 s) for all
        # processes together, against one per process without a shared store.
        skew = 0.3
        write_config(config, stack, f"{int(skew * 1000)}ms")
        say(f"{args.procs} serve processes x {args.requests} requests, {args.ttl} s tokens")
        before = issued(load_dir / "stack")
        results = [None] * args.procs
        threads = [threading.Thread(target=serve_load, args=(args.binary, config, args.requests, env, results, i))
                   for i in range(args.procs)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
        calls = issued(load_dir / "stack") - before
        result.update({"load_wall_s": round(wall, 2), "load_token_calls": calls,
                       "load_lifetimes": round(wall / args.ttl, 2),
                       "load_token_calls_per_lifetime": round(calls / (wall / args.ttl), 2),
                       "load_token_calls_per_renewal_period": round(calls / (wall / (args.ttl - skew)), 2),
                       "load_ok": sum(r["ok"] for r in results if r), "load_requests": args.procs * args.requests,
                       "load_renewals_reported": sum(r["renewals"] for r in results if r)})
    finally:
        stack_down(load_dir / "stack")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Fleet benchmark (issue 40), standard library only.

  fleet_bench.py --binary PATH [--work DIR] [--hosts 3] [--seconds 30] [--ttl 6]

--hosts `tokenrelay serve` processes, each with a state directory (and SQLite store) of its own,
send requests one at a time for --seconds against the interop resource server, with --ttl second
client-credentials tokens (renewed 1 s before expiry), twice:

1. sharing one PostgreSQL tier (scripts/pg, a real server in a temp dir): tokens issued per
   renewal period for the whole fleet (goal ~1);
2. alone (no shared tier): the same workload, for comparison (~one per host).

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

from store_bench import answer, issued, stack_down, stack_up, write_config

REPO = Path(__file__).resolve().parent.parent.parent
PG = REPO / "scripts/pg"
STORE_KEY = "mDj5mc3AX3m8Sks8vgd3lfXo5dN2B3oq/5+yk2mDsOQ="
SKEW = 1


def say(text):
    print(f"   fleet: {text}", file=sys.stderr, flush=True)


def pg_env(directory):
    values = {}
    for line in (directory / "pg.env").read_text().splitlines():
        name, _, value = line.partition("=")
        values[name] = value.strip().strip("'\"")
    return values


def store_config(shared_url):
    """Each host's `store:`: its own sealed SQLite store, and the fleet's PostgreSQL tier when given."""
    if not shared_url:
        return "{ encryption_key: { env: TR_STORE_KEY } }"
    return ("{ encryption_key: { env: TR_STORE_KEY }, shared: { type: postgres, "
            f"url: \"{shared_url}\", password: {{ env: TR_PG_PASSWORD }}, timeout: 2s }} }}")


def host_load(binary, config, seconds, env, results, index):
    process = subprocess.Popen([binary, "--config", str(config), "--log-level", "warn"], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ok = sent = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": sent, "method": "request",
                                        "params": {"path": "/whoami"}}) + "\n")
        process.stdin.flush()
        sent += 1
        if answer(process).get("result", {}).get("status") == 200:
            ok += 1
    process.stdin.close()
    process.wait(timeout=60)
    results[index] = {"ok": ok, "sent": sent}


def run_fleet(binary, work, stack_state, stack, hosts, seconds, shared):
    config = work / "config.yaml"
    write_config(config, stack, f"{SKEW}s", store=store_config(shared and shared["PG_URL"]))
    before = issued(stack_state)
    results = [None] * hosts
    threads = []
    for index in range(hosts):
        state = work / f"host{index}"
        state.mkdir(mode=0o700)
        env = dict(os.environ, BENCH_SECRET="svc-secret", XDG_STATE_HOME=str(state), TR_STORE_KEY=STORE_KEY,
                   TR_PG_PASSWORD=shared["PG_PASSWORD"] if shared else "")
        threads.append(threading.Thread(target=host_load, args=(binary, config, seconds, env, results, index)))
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    tokens = issued(stack_state) - before
    periods = wall / (float(stack["ACCESS_TTL"]) - SKEW) if "ACCESS_TTL" in stack else None
    return {"tokens": tokens, "wall_s": round(wall, 2), "periods": round(periods, 2) if periods else None,
            "ok": sum(r["ok"] for r in results if r), "sent": sum(r["sent"] for r in results if r)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--work")
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--ttl", type=int, default=6)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="tokenrelay-fleet-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o700)
    # A directory the server's owner can reach (run as root, it runs as `nobody`): not under `work`.
    pg_dir = Path(tempfile.gettempdir()) / f"tr-pg-bench-{os.getpid()}"
    stack_state = work / "stack"
    result = {"hosts": args.hosts, "ttl_s": args.ttl, "seconds": args.seconds}
    subprocess.run([str(PG), "up", str(pg_dir)], check=True, stdout=subprocess.DEVNULL)
    try:
        stack = stack_up(stack_state, args.ttl, 0)
        stack.setdefault("ACCESS_TTL", str(args.ttl))
        try:
            for name, shared in (("fleet", pg_env(pg_dir)), ("alone", None)):
                say(f"{args.hosts} hosts {'sharing one PostgreSQL tier' if shared else 'alone'}, "
                    f"{args.seconds:g} s of requests, {args.ttl} s tokens")
                directory = work / name
                directory.mkdir(mode=0o700)
                figures = run_fleet(args.binary, directory, stack_state, stack, args.hosts, args.seconds, shared)
                result.update({f"{name}_{key}": value for key, value in figures.items()})
                if figures["periods"]:
                    result[f"{name}_tokens_per_period"] = round(figures["tokens"] / figures["periods"], 2)
        finally:
            stack_down(stack_state)
    finally:
        subprocess.run([str(PG), "down", str(pg_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

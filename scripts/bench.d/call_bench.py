#!/usr/bin/env python3
"""`tokenrelay call` per call against the `curl` CLI with the same token, standard library only.

  call_bench.py --binary BIN --config CFG --path /x --url URL --token TOKEN [--env E] [--calls 50]

Runs `tokenrelay call GET PATH` and `curl -H 'Authorization: Bearer TOKEN' URL` alternately
(interleaved, so drift on a shared machine hits both alike), each one process start to exit, and
prints one JSON object: the median milliseconds per call of each and their ratio. Any failed call
is an error (non-zero exit), never a figure. store_bench.py uses `compare` for the stored-token case.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time


def compare(relay, curl, calls, env=None):
    """Median seconds per call of the `relay` and `curl` argvs, run alternately `calls` times each
    after one untimed run of each; raises CalledProcessError when any run fails."""
    for command in (relay, curl):
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    relay_times, curl_times = [], []
    for index in range(calls):
        order = [(relay, relay_times), (curl, curl_times)]
        for command, times in order if index % 2 == 0 else reversed(order):
            start = time.perf_counter()
            subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
    return statistics.median(relay_times), statistics.median(curl_times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--env")
    parser.add_argument("--path", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    relay = [args.binary, "call", "GET", args.path, "--config", args.config] + (["--env", args.env] if args.env else [])
    curl = ["curl", "-sf", "-o", "/dev/null", "-H", f"Authorization: Bearer {args.token}", args.url]
    try:
        relay_s, curl_s = compare(relay, curl, args.calls)
    except subprocess.CalledProcessError as error:
        print(f"call_bench: {error}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"calls": args.calls, "call_ms": round(relay_s * 1000, 2), "curl_ms": round(curl_s * 1000, 2),
                      "call_vs_curl": round(relay_s / curl_s, 3)}))


if __name__ == "__main__":
    main()

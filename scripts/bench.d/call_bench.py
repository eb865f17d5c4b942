#!/usr/bin/env python3
"""`tokenrelay call` per call against the `curl` CLI with the same token, standard library only.

  call_bench.py --binary BIN --config CFG --path /x --url URL --token TOKEN [--env E] [--calls 50]
                [--stored-config CFG2]

Runs `tokenrelay call GET PATH` and `curl -H 'Authorization: Bearer TOKEN' URL` alternately
(interleaved, so drift on a shared machine hits both alike), each one process start to exit, and
prints one JSON object: the median milliseconds per call of each and their ratio. With
--stored-config, `tokenrelay call GET PATH --config CFG2` (a profile whose token the session store
holds: the first, untimed call stores it) joins the rotation, against the same server: `stored_ms`,
`stored_vs_curl` and `stored_vs_static`. Any failed call is an error (non-zero exit), never a
figure. store_bench.py uses `compare` for its own stored-token case.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time


def compare_all(commands, calls, env=None):
    """Median seconds per call of each argv in `commands`, run in turn `calls` times each (the
    order rotating every round) after one untimed run of each; raises CalledProcessError when any
    run fails."""
    for command in commands:
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    times = [[] for _ in commands]
    for index in range(calls):
        shift = index % len(commands)
        for position in list(range(shift, len(commands))) + list(range(shift)):
            start = time.perf_counter()
            subprocess.run(commands[position], check=True, env=env, stdout=subprocess.DEVNULL)
            times[position].append(time.perf_counter() - start)
    return [statistics.median(each) for each in times]


def compare(relay, curl, calls, env=None):
    """Median seconds per call of the `relay` and `curl` argvs, run alternately."""
    relay_s, curl_s = compare_all([relay, curl], calls, env)
    return relay_s, curl_s


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--stored-config")
    parser.add_argument("--env")
    parser.add_argument("--path", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    environment = ["--env", args.env] if args.env else []
    relay = [args.binary, "call", "GET", args.path, "--config", args.config] + environment
    curl = ["curl", "-sf", "-o", "/dev/null", "-H", f"Authorization: Bearer {args.token}", args.url]
    commands = [relay, curl]
    if args.stored_config:
        commands.append([args.binary, "call", "GET", args.path, "--config", args.stored_config] + environment)
    try:
        medians = compare_all(commands, args.calls)
    except subprocess.CalledProcessError as error:
        print(f"call_bench: {error}", file=sys.stderr)
        sys.exit(1)
    relay_s, curl_s = medians[0], medians[1]
    result = {"calls": args.calls, "call_ms": round(relay_s * 1000, 2), "curl_ms": round(curl_s * 1000, 2),
              "call_vs_curl": round(relay_s / curl_s, 3)}
    if args.stored_config:
        stored_s = medians[2]
        result.update({"stored_ms": round(stored_s * 1000, 2), "stored_vs_curl": round(stored_s / curl_s, 3),
                       "stored_vs_static": round(stored_s / relay_s, 3)})
    print(json.dumps(result))


if __name__ == "__main__":
    main()

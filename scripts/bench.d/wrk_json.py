#!/usr/bin/env python3
"""Runs wrk and prints its result as one JSON line (throughput, p50/p90/p99/max µs, errors).

  wrk_json.py --url URL --connections N --duration S [--threads T] [--watch name=pid,...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

UNITS = {"us": 1.0, "ms": 1000.0, "s": 1_000_000.0}


def micros(text):
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip())
    return round(float(match.group(1)) * UNITS[match.group(2)], 1) if match else None


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--watch", default="")
    args = parser.parse_args()
    watched = [(item.split("=")[0], int(item.split("=")[1])) for item in args.watch.split(",") if "=" in item]
    before = [cpu_seconds(pid) for _, pid in watched]
    children_before = os.times()
    start = time.monotonic()
    output = subprocess.run(
        ["wrk", "-t", str(args.threads), "-c", str(args.connections), "-d", f"{args.duration}s", "--latency", args.url],
        capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - start
    children_after = os.times()
    result = {"inflight": args.connections, "client": "wrk"}
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    result["throughput"] = float(match.group(1)) if match else 0.0
    for label, key in (("50%", "p50_us"), ("90%", "p90_us"), ("99%", "p99_us")):
        match = re.search(rf"^\s+{re.escape(label)}\s+(\S+)", output, re.MULTILINE)
        result[key] = micros(match.group(1)) if match else None
    match = re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", output)
    result["max_us"] = micros(match.group(1)) if match else None
    match = re.search(r"(\d+) requests in", output)
    result["requests"] = int(match.group(1)) if match else 0
    errors = 0
    match = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors += int(match.group(1)) if match else 0
    match = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    errors += sum(int(g) for g in match.groups()) if match else 0
    result["errors"] = errors
    cpu = {"wrk": round(100 * (children_after.children_user + children_after.children_system
                               - children_before.children_user - children_before.children_system) / wall, 1)}
    for (name, pid), used in zip(watched, before):
        cpu[name] = round(cpu.get(name, 0) + 100 * (cpu_seconds(pid) - used) / wall, 1)
    result["cpu_pct"] = cpu
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

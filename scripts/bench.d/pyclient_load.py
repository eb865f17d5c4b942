#!/usr/bin/env python3
"""tokenrelay's Python client (clients/python) under load for scripts/bench.

  pyclient_load.py --repo DIR --binary BIN --config CFG --path /x --inflight N --total M

Uses `AsyncRelay(config=..., binary=...)` and `await relay.request("GET", path)` with N worker
tasks. Prints {"available": false, ...} when the client cannot be imported.
"""
import argparse
import asyncio
import json
import os
import sys
import time


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, TypeError):
        return 0.0


def status_of(response):
    if isinstance(response, dict):
        return response.get("status")
    return getattr(response, "status", None)


async def run(args, AsyncRelay):
    relay = AsyncRelay(config=args.config, binary=args.binary)
    entered = hasattr(relay, "__aenter__")
    if entered:
        relay = await relay.__aenter__()
    try:
        first = await relay.request("GET", args.path)  # warm-up: spawn, token
        if status_of(first) != 200:
            return {"available": True, "errors": args.total, "first_status": status_of(first)}
        latencies, errors, remaining = [], 0, args.total

        async def worker():
            nonlocal errors, remaining
            while remaining > 0:
                remaining -= 1
                t0 = time.perf_counter_ns()
                try:
                    if status_of(await relay.request("GET", args.path)) != 200:
                        errors += 1
                except Exception:  # noqa: BLE001 - any failure is an error of this request
                    errors += 1
                latencies.append(time.perf_counter_ns() - t0)

        watched = [(item.split("=")[0], int(item.split("=")[1])) for item in args.watch.split(",") if "=" in item]
        watched += [("python", os.getpid()), ("tokenrelay", getattr(relay, "pid", None))]
        before = [cpu_seconds(pid) for _, pid in watched]
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.inflight)))
        wall = time.perf_counter() - start
        cpu = {name: round(100 * (cpu_seconds(pid) - used) / wall, 1) for (name, pid), used in zip(watched, before)}
    finally:
        if entered:
            await relay.__aexit__(None, None, None)
        elif hasattr(relay, "aclose"):
            await relay.aclose()
        elif hasattr(relay, "close"):
            result = relay.close()
            if asyncio.iscoroutine(result):
                await result
    latencies.sort()
    return {
        "available": True, "requests": len(latencies), "errors": errors, "inflight": args.inflight,
        "wall_s": round(wall, 4), "throughput": round(len(latencies) / wall, 1),
        "p50_us": round(latencies[len(latencies) // 2] / 1000, 1),
        "p99_us": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1000, 1),
        "client": "tokenrelay AsyncRelay", "cpu_pct": cpu,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--total", type=int, default=5000)
    parser.add_argument("--watch", default="")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.repo, "clients", "python"))
    sys.path.insert(0, os.path.join(args.repo, "clients", "python", "src"))
    try:
        from tokenrelay import AsyncRelay
    except ImportError as error:
        print(json.dumps({"available": False, "reason": f"clients/python not importable: {error}"}))
        return 0
    print(json.dumps(asyncio.run(run(args, AsyncRelay)), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

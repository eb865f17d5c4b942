#!/usr/bin/env python3
"""httpx references for scripts/bench: N requests in flight in one process, one JSON line out.

  httpx_load.py --url URL --inflight N --total M [--header 'K: V'] [--sync]
  httpx_load.py --url URL --inflight N --total M --oauth TOKEN_URL --client-id ID --client-secret S

--sync uses httpx.Client (one in flight); otherwise httpx.AsyncClient with N worker tasks.
--oauth uses Authlib's AsyncOAuth2Client with the client_credentials grant, fetching the token
in-process (what a Python user would write instead of tokenrelay's Python client).
"""
import argparse
import asyncio
import json
import os
import sys
import time

import httpx


def summarize(latencies, errors, wall, inflight):
    latencies.sort()

    def pct(p):
        if not latencies:
            return 0.0
        index = max(0, min(len(latencies) - 1, int(-(-len(latencies) * p // 1)) - 1))
        return round(latencies[index] / 1000, 1)

    return {
        "requests": len(latencies), "errors": errors, "inflight": inflight,
        "wall_s": round(wall, 4), "throughput": round(len(latencies) / wall, 1) if wall else 0,
        "p50_us": pct(0.5), "p90_us": pct(0.9), "p99_us": pct(0.99),
        "max_us": round(latencies[-1] / 1000, 1) if latencies else 0,
    }


def headers_of(args):
    if not args.header:
        return {}
    name, _, value = args.header.partition(":")
    return {name.strip(): value.strip()}


def run_sync(args):
    latencies, errors = [], 0
    with httpx.Client(headers=headers_of(args)) as client:
        start = time.perf_counter()
        for _ in range(args.total):
            t0 = time.perf_counter_ns()
            try:
                if client.get(args.url).status_code != 200:
                    errors += 1
            except httpx.HTTPError:
                errors += 1
            latencies.append(time.perf_counter_ns() - t0)
        wall = time.perf_counter() - start
    return summarize(latencies, errors, wall, 1)


async def run_async(args):
    limits = httpx.Limits(max_connections=args.inflight, max_keepalive_connections=args.inflight)
    if args.oauth:
        from authlib.integrations.httpx_client import AsyncOAuth2Client
        client = AsyncOAuth2Client(
            client_id=args.client_id, client_secret=args.client_secret, token_endpoint=args.oauth,
            grant_type="client_credentials", limits=limits)
    else:
        client = httpx.AsyncClient(headers=headers_of(args), limits=limits)
    latencies, errors, remaining = [], 0, args.total

    async def worker():
        nonlocal errors, remaining
        while remaining > 0:
            remaining -= 1
            t0 = time.perf_counter_ns()
            try:
                if (await client.get(args.url)).status_code != 200:
                    errors += 1
            except Exception:  # noqa: BLE001 - any failure is an error of this request
                errors += 1
            latencies.append(time.perf_counter_ns() - t0)

    async with client:
        if args.oauth:
            await client.fetch_token()
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.inflight)))
        wall = time.perf_counter() - start
    return summarize(latencies, errors, wall, args.inflight)


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
    parser.add_argument("--inflight", type=int, default=1)
    parser.add_argument("--total", type=int, default=1000)
    parser.add_argument("--header")
    parser.add_argument("--sync", action="store_true")
    parser.add_argument("--oauth")
    parser.add_argument("--client-id")
    parser.add_argument("--client-secret")
    parser.add_argument("--watch", default="", help="name=pid,... whose CPU share is reported")
    args = parser.parse_args()
    watched = [(item.split("=")[0], int(item.split("=")[1])) for item in args.watch.split(",") if "=" in item]
    watched.append(("python", os.getpid()))
    before = [cpu_seconds(pid) for _, pid in watched]
    start = time.monotonic()
    result = run_sync(args) if args.sync else asyncio.run(run_async(args))
    wall = time.monotonic() - start
    result["cpu_pct"] = {name: round(100 * (cpu_seconds(pid) - used) / wall, 1)
                         for (name, pid), used in zip(watched, before)}
    result["client"] = "httpx+authlib" if args.oauth else ("httpx.Client" if args.sync else "httpx.AsyncClient")
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

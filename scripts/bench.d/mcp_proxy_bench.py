#!/usr/bin/env python3
"""A forwarded MCP `tools/call` through `tokenrelay mcp-proxy` against a direct one to the same
local MCP server (the official MCP Python SDK's, no authorization, JSON answers).

  mcp_proxy_bench.py --binary BIN --calls N [--inflight K]

Starts the SDK's server in a child process on a loopback port, then times `tools/call echo`:
directly (HTTP/1.1 keep-alive POSTs, one connection per request in flight) and through one
`tokenrelay mcp-proxy URL` process (newline-delimited JSON-RPC on its stdio, a private HOME and
XDG state). Prints one JSON object: p50 milliseconds at 1 in flight and requests per second at K
in flight of each, and their ratios. Any failed call is an error (non-zero exit), never a figure.
Needs the `mcp` package (scripts/requirements-dev.txt).
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PROTOCOL = "2025-11-25"


def serve(port: int) -> None:
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    def echo(text: str) -> str:
        """Echoes the text."""
        return text

    app = server.streamable_http_app(json_response=True, stateless_http=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def call(id: int) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "bench"}},
    }


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def answered(message: dict) -> None:
    if "result" not in message or message["result"].get("isError"):
        raise SystemExit(f"a call failed: {json.dumps(message)[:300]}")


class Direct:
    """POSTs to the MCP endpoint over one keep-alive connection."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.connection.connect()
        self.connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, message: dict) -> dict:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
        }
        self.connection.request("POST", "/mcp", json.dumps(message), headers)
        response = self.connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"direct call: HTTP {response.status}")
        return json.loads(body)


class Proxy:
    """One `tokenrelay mcp-proxy URL` process driven over its stdio."""

    def __init__(self, binary: str, url: str, home: str) -> None:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "XDG_STATE_HOME": home + "/state",
            "XDG_CONFIG_HOME": home + "/config",
            "XDG_CACHE_HOME": home + "/cache",
        }
        self.process = subprocess.Popen(
            [binary, "mcp-proxy", url],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.answers: dict[int, threading.Event] = {}
        self.lock = threading.Lock()

    def write(self, message: dict) -> None:
        assert self.process.stdin
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def read(self) -> dict:
        assert self.process.stdout
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit("mcp-proxy ended")
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(timeout=60)


def p50_direct(port: int, calls: int) -> float:
    direct = Direct(port)
    answered(direct.send(INITIALIZE))
    times = []
    for index in range(calls + calls // 10):
        start = time.perf_counter()
        answered(direct.send(call(index + 1)))
        times.append(time.perf_counter() - start)
    return statistics.median(times[calls // 10 :]) * 1000


def rate_direct(port: int, calls: int, inflight: int) -> float:
    def worker(count: int) -> None:
        direct = Direct(port)
        for index in range(count):
            answered(direct.send(call(index + 1)))

    threads = [
        threading.Thread(target=worker, args=(calls // inflight,))
        for _ in range(inflight)
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (calls // inflight) * inflight / (time.perf_counter() - start)


def proxied(binary: str, url: str, calls: int, inflight: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="tokenrelay-bench-proxy-") as home:
        proxy = Proxy(binary, url, home)
        try:
            proxy.write(INITIALIZE)
            answered(proxy.read())
            proxy.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
            times = []
            for index in range(calls + calls // 10):
                start = time.perf_counter()
                proxy.write(call(index + 1))
                answered(proxy.read())
                times.append(time.perf_counter() - start)
            p50 = statistics.median(times[calls // 10 :]) * 1000
            # K in flight: a new call is written as each answer arrives.
            total = (calls // inflight) * inflight
            start = time.perf_counter()
            sent = 0
            for _ in range(inflight):
                sent += 1
                proxy.write(call(100_000 + sent))
            for _ in range(total):
                answered(proxy.read())
                if sent < total:
                    sent += 1
                    proxy.write(call(100_000 + sent))
            rate = total / (time.perf_counter() - start)
        finally:
            proxy.close()
    return p50, rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if not args.binary:
        parser.error("--binary is required")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)], stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the MCP server did not start")
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        p50_direct(port, args.calls)  # warms the server up (its first calls are slower)
        direct_p50 = p50_direct(port, args.calls)
        direct_rate = rate_direct(port, args.calls, args.inflight)
        proxy_p50, proxy_rate = proxied(args.binary, url, args.calls, args.inflight)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(
        json.dumps(
            {
                "calls": args.calls,
                "inflight": args.inflight,
                "direct_p50_ms": round(direct_p50, 3),
                "proxy_p50_ms": round(proxy_p50, 3),
                "p50_ratio": round(proxy_p50 / direct_p50, 2),
                "direct_rps": round(direct_rate, 1),
                "proxy_rps": round(proxy_rate, 1),
                "rps_ratio": round(proxy_rate / direct_rate, 2),
            }
        )
    )


if __name__ == "__main__":
    main()

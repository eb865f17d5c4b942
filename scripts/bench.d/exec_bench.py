#!/usr/bin/env python3
"""`tokenrelay exec`'s endpoint against nginx `proxy_pass` with a fixed header (SPEC §12), both in
front of the same nginx serving a small JSON file; wrk drives each at 1 connection (p50) and at
64 (throughput). Prints one JSON line with both and their ratios (goals: p50 within 1.5x,
throughput at least 0.5x).

  exec_bench.py --binary PATH [--duration S]
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
TOKEN = "bench-exec-upstream-token-0123456789"
CONFIG = """daemon off;
master_process on;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 4096; use epoll; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
    types {{ application/json json; }}
    upstream origin {{ server 127.0.0.1:{origin}; keepalive 128; }}
    server {{ listen 127.0.0.1:{origin} backlog=4096; root {dir}/www; location / {{ }} }}
    server {{
        listen 127.0.0.1:{proxy} backlog=4096;
        location /bench/ {{
            proxy_pass http://origin/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "Bearer {token}";
        }}
    }}
}}
"""


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def micros(text):
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip())
    scale = {"us": 1.0, "ms": 1000.0, "s": 1_000_000.0}
    return float(match.group(1)) * scale[match.group(2)] if match else None


def wrk(url, connections, duration, header=None):
    command = ["wrk", "-t", "1", "-c", str(connections), "-d", f"{duration}s", "--latency"]
    if header:
        command += ["-H", header]
    output = subprocess.run(command + [url], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in output or "Socket errors" in output:
        raise SystemExit(f"wrk saw errors against {url}: {output}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    p50 = micros(re.search(r"^\s+50%\s+(\S+)", output, re.MULTILINE).group(1))
    return rps, p50


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--duration", type=int, default=5)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="tokenrelay-exec-bench-")
    relay = nginx = None
    try:
        os.makedirs(f"{work}/www")
        os.makedirs(f"{work}/tmp")
        with open(f"{work}/www/small.json", "w") as handle:
            handle.write('{"id":42,"name":"bench","tags":["a","b"]}\n')
        os.chmod(work, 0o755)
        os.chmod(f"{work}/www", 0o755)
        os.chmod(f"{work}/www/small.json", 0o644)
        origin, proxy = free_port(), free_port()
        with open(f"{work}/nginx.conf", "w") as handle:
            handle.write(CONFIG.format(dir=work, origin=origin, proxy=proxy, token=TOKEN))
        nginx = subprocess.Popen([NGINX, "-p", work, "-c", f"{work}/nginx.conf", "-e", f"{work}/nginx-error.log"],
                                 stderr=subprocess.DEVNULL)
        with open(f"{work}/config.yaml", "w") as handle:
            handle.write(f"""version: 1
store: {{ type: memory }}
environments:
  bench:
    base_url: http://127.0.0.1:{origin}
    profiles:
      p: {{ type: bearer, token: {{ env: BENCH_EXEC_TOKEN }} }}
    exec: {{}}
""")
        # The child prints the endpoint and its placeholder, then waits for its stdin to close.
        relay = subprocess.Popen(
            [args.binary, "exec", "--config", f"{work}/config.yaml", "--", "/bin/sh", "-c",
             'echo "$TOKENRELAY_URL $TOKENRELAY_TOKEN"; cat > /dev/null'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, BENCH_EXEC_TOKEN=TOKEN, HOME=work))
        url, placeholder = relay.stdout.readline().split()
        exec_url = url + "/small.json"
        proxy_url = f"http://127.0.0.1:{proxy}/bench/small.json"
        header = f"Authorization: Bearer {placeholder}"
        for _ in range(100):
            if subprocess.run(["curl", "-fs", "-o", "/dev/null", proxy_url]).returncode == 0:
                break
            time.sleep(0.05)
        wrk(exec_url, 4, 1, header)  # warm both
        wrk(proxy_url, 4, 1)
        exec_rps, _ = wrk(exec_url, 64, args.duration, header)
        proxy_rps, _ = wrk(proxy_url, 64, args.duration)
        _, exec_p50 = wrk(exec_url, 1, args.duration, header)
        _, proxy_p50 = wrk(proxy_url, 1, args.duration)
        print(json.dumps({
            "exec_p50_us": exec_p50, "nginx_p50_us": proxy_p50, "p50_ratio": round(exec_p50 / proxy_p50, 2),
            "exec_rps": round(exec_rps), "nginx_rps": round(proxy_rps), "rps_ratio": round(exec_rps / proxy_rps, 2),
        }))
    finally:
        if relay:
            relay.stdin.close()
            relay.wait(timeout=60)
        if nginx:
            nginx.terminate()
            nginx.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

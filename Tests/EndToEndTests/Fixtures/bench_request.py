#!/usr/bin/python3
"""Measures `request` throughput through a pipe (measurement only, not a test).

Usage: bench_request.py TOKENRELAY_BINARY [COUNT]
Starts the shared fixture server (TestSupport/Fixtures/fixture_server.py recording), serves a config with an api_key profile pointing at it, writes COUNT
pipelined `request` GETs to the relay's stdin at once and reports replies per second.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
binary = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
folder = tempfile.mkdtemp(prefix="tokenrelay-bench-")
fixture = os.path.join(here, "..", "..", "TestSupport", "Fixtures", "fixture_server.py")
server = subprocess.Popen(["/usr/bin/python3", "-u", fixture, "recording", os.path.join(folder, "log")],
                          stdout=subprocess.PIPE)
port = server.stdout.readline().split()[0].decode()
config = os.path.join(folder, "config.yaml")
with open(config, "w") as f:
    f.write("version: 1\ndefault_environment: local\nenvironments:\n  local:\n"
            "    base_url: http://127.0.0.1:%s\n    default_profile: key\n    profiles:\n"
            "      key:\n        type: api_key\n        header: X-API-Key\n        value: { env: BENCH_KEY }\n" % port)
env = dict(os.environ, BENCH_KEY="bench-key", XDG_STATE_HOME=os.path.join(folder, "state"))
relay = subprocess.Popen([binary, "serve", "--config", config, "--log-level", "error"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env)
payload = "".join('{"jsonrpc":"2.0","id":%d,"method":"request","params":{"path":"/status/200"}}\n' % i
                  for i in range(count)).encode()
errors = [0]


def read():
    for _ in range(count):
        line = relay.stdout.readline()
        if b'"result"' not in line:
            errors[0] += 1


reader = threading.Thread(target=read)
start = time.monotonic()
reader.start()
relay.stdin.write(payload)
relay.stdin.flush()
reader.join()
elapsed = time.monotonic() - start
relay.stdin.close()
relay.wait()
server.kill()
print("%d requests in %.3f s: %.0f requests/s, %d errors" % (count, elapsed, count / elapsed, errors[0]))

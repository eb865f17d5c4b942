#!/usr/bin/python3
"""Loopback servers that only let a caller in with a real access token, for the credential-helper
tests of `tokenrelay token` (standard library only).

Usage:
  credential_stub.py kube  LOG_PATH WHOAMI_URL CERT KEY   HTTPS stub of the Kubernetes API
  credential_stub.py git   LOG_PATH WHOAMI_URL REPO_ROOT  smart-HTTP git server (git http-backend)

Prints "PORT" on its first stdout line, then serves on 127.0.0.1 until killed. A token is checked
by sending it to WHOAMI_URL (the interop resource server's /whoami, which introspects it at the
authorization server): only a token the AS issued and still holds active gets in.

kube: GET /api with "Authorization: Bearer T" -> 200 APIVersions; anything else 401 (a Status).
git:  every request needs HTTP Basic "USER:T" (any user) -> handed to `git http-backend`
      (GIT_PROJECT_ROOT=REPO_ROOT); without or with a bad one, 401 with a Basic challenge.
Every request is appended to LOG_PATH as one JSON line {path, scheme: "bearer"|"basic"|"none",
user, token_ok, status} BEFORE the response is written (never the token itself).
"""
import base64
import json
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

mode, log_path, whoami_url = sys.argv[1], sys.argv[2], sys.argv[3]
log_lock = threading.Lock()


def append(record):
    with log_lock:
        with open(log_path, "a") as f:
            f.write(json.dumps(record) + "\n")


def token_is_active(token):
    request = urllib.request.Request(whoami_url, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status == 200
    except urllib.error.HTTPError:
        return False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def credentials(self):
        header = self.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            return "bearer", None, header[7:]
        if header.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            except Exception:
                return "basic", None, None
            return "basic", user, password
        return "none", None, None

    def reply(self, status, body, content_type, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        scheme, user, token = self.credentials()
        wanted = "bearer" if mode == "kube" else "basic"
        ok = scheme == wanted and bool(token) and token_is_active(token)
        record = {"path": self.path, "scheme": scheme, "user": user, "token_ok": ok}
        if not ok:
            record["status"] = 401
            append(record)
            if mode == "kube":
                status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized",
                          "code": 401, "message": "Unauthorized"}
                return self.reply(401, json.dumps(status).encode(), "application/json")
            return self.reply(401, b"authentication required\n", "text/plain",
                              [("WWW-Authenticate", 'Basic realm="credential-stub"')])
        if mode == "kube":
            record["status"] = 200
            append(record)
            versions = {"kind": "APIVersions", "versions": ["v1"],
                        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
            return self.reply(200, json.dumps(versions).encode(), "application/json")
        self.git_backend(body, user, record)

    def git_backend(self, body, user, record):
        parts = urlsplit(self.path)
        env = {
            "GIT_PROJECT_ROOT": sys.argv[4], "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": parts.path,
            "QUERY_STRING": parts.query, "REQUEST_METHOD": self.command, "REMOTE_USER": user or "",
            "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), "PATH": "/usr/bin:/bin",
        }
        result = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60)
        head, _, payload = result.stdout.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        record["status"] = status
        append(record)
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = handle_any
    do_POST = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if mode == "kube":
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[4], sys.argv[5])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()

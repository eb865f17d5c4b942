"""The API behind `tokenrelay exec` in its end-to-end tests: a client-credentials token endpoint
and routes that answer only a request bearing a token it issued (401 invalid_token otherwise).
Prints its port on the first line of stdout.

    exec_upstream.py CLIENT_SECRET GIT_ROOT

Routes (under any prefix, e.g. /api): POST /token (client_secret_post or basic; a fresh token per
call); GET /events (an event stream of 3 events, the third echoing the Authorization header);
GET /big?bytes=N (N bytes in 64 KiB writes); POST /upload (answers the byte count it read);
POST /v1/chat/completions (OpenAI's shape; "stream": true answers server-sent chunks);
/git/... (git http-backend over GIT_ROOT, push included).
"""

import base64
import json
import os
import secrets
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

CLIENT_SECRET = sys.argv[1]
GIT_ROOT = sys.argv[2]
issued = set()
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def authorized(self):
        value = self.headers.get("Authorization") or ""
        with lock:
            return value.startswith("Bearer ") and value[7:] in issued

    def handle_any(self):
        parts = urlsplit(self.path)
        route = parts.path
        if route.startswith("/api/"):
            route = route[4:]
        if route == "/token":
            form = parse_qs(self.body().decode())
            secret = form.get("client_secret", [""])[0]
            basic = self.headers.get("Authorization") or ""
            if basic.startswith("Basic "):
                secret = base64.b64decode(basic[6:]).decode().partition(":")[2]
            if secret != CLIENT_SECRET:
                return self.reply(401, b'{"error":"invalid_client"}')
            token = "issued-" + secrets.token_urlsafe(16)
            with lock:
                issued.add(token)
            return self.reply(200, json.dumps({"access_token": token, "token_type": "Bearer",
                                               "expires_in": 3600}).encode())
        if not self.authorized():
            self.body()
            return self.reply(401, b"no", "text/plain",
                              [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        if route == "/events":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for index, data in enumerate(["one", "two", "auth " + self.headers.get("Authorization")]):
                self.wfile.write(("id: %d\ndata: %s\n\n" % (index, data)).encode())
                self.wfile.flush()
            self.close_connection = True  # the stream ends with the connection
            return
        if route == "/big":
            count = int(parse_qs(parts.query).get("bytes", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(count))
            self.end_headers()
            block = b"z" * 65536
            while count > 0:
                self.wfile.write(block[:count])
                count -= min(count, len(block))
            return
        if route == "/upload":
            # The byte count, and how the body was framed on its way here.
            framing = "chunked" if self.headers.get("Transfer-Encoding") else "sized"
            return self.reply(200, ("%d %s" % (len(self.body()), framing)).encode(), "text/plain")
        if route == "/v1/chat/completions":
            request = json.loads(self.body() or b"{}")
            text = "hello from " + request.get("model", "?")
            if request.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for piece in text.split(" "):
                    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": request["model"],
                             "choices": [{"index": 0, "delta": {"content": piece + " "}, "finish_reason": None}]}
                    self.wfile.write(("data: %s\n\n" % json.dumps(chunk)).encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
                return
            answer = {"id": "c1", "object": "chat.completion", "created": 0, "model": request.get("model"),
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                   "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}}
            return self.reply(200, json.dumps(answer).encode())
        if route.startswith("/git/"):
            return self.git(route[4:], parts.query)
        self.reply(404, b"no such route", "text/plain")

    def git(self, path_info, query):
        environment = dict(os.environ, GIT_PROJECT_ROOT=GIT_ROOT, GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path_info,
                           REQUEST_METHOD=self.command, QUERY_STRING=query, REMOTE_USER="exec",
                           CONTENT_TYPE=self.headers.get("Content-Type") or "",
                           CONTENT_LENGTH=self.headers.get("Content-Length") or "0")
        result = subprocess.run(["git", "http-backend"], input=self.body(), env=environment, capture_output=True)
        head, _, body = result.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split(" ")[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()

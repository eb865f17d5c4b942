#!/usr/bin/python3
"""A hostile token endpoint for the end-to-end tests of server text (standard library only).

Usage: echoing_token_server.py
Prints its port on the first stdout line, then serves until killed.

POST /token       client_id "renews": the first request gets a token; every other request, of
                  any client, is refused with the client secret it sent echoed back: in `error`,
                  in a long `error_description` (the secret followed by a combining accent, many
                  times, far past 256 bytes), in `error_uri`, and in a WWW-Authenticate challenge
                  (HTTP 401 for Basic clients, 400 otherwise).
GET  /api/data    200 {"ok": true}
GET  /api/events  an event stream with one event, then the connection is closed
"""
import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote_plus

issued = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode())
        client = form.get("client_id", [""])[0]
        secret = form.get("client_secret", [""])[0]
        basic = self.headers.get("Authorization", "")
        if basic.startswith("Basic "):
            user, _, password = base64.b64decode(basic[6:]).decode().partition(":")
            client, secret = unquote_plus(user), unquote_plus(password)
        with lock:
            issued[client] = issued.get(client, 0) + 1
            count = issued[client]
        if client == "renews" and count == 1:
            token = {"access_token": "at-renews-first-4d1f9a", "token_type": "Bearer", "expires_in": 3600}
            return self.reply(200, json.dumps(token).encode(), [("Content-Type", "application/json")])
        error = {
            "error": "invalid_client " + secret,
            "error_description": ("the secret " + secret + "\u0301 is wrong; ") * 20,
            "error_uri": "https://idp.example/errors?secret=" + secret,
        }
        challenge = 'Basic realm="%s", error="%s"' % (secret, secret)
        status = 401 if basic else 400
        self.reply(status, json.dumps(error).encode(),
                   [("Content-Type", "application/json"), ("WWW-Authenticate", challenge)])

    def do_GET(self):
        if self.path.startswith("/api/events"):
            return self.reply(200, b"data: one\n\n", [("Content-Type", "text/event-stream")])
        self.reply(200, b'{"ok": true}', [("Content-Type", "application/json")])


class Server(ThreadingHTTPServer):
    daemon_threads = True


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""A token endpoint that rotates refresh tokens and refuses a spent one, and an API that refuses
revoked access tokens (standard library only), for the end-to-end tests of renewals interrupted
by a signal and of 401s on unsafe methods.

Usage: rotating_token_server.py SEED [--hold-first-refresh | --hold-refresh N]
Prints its port on the first stdout line, then serves until killed. The test drives it through
the binary itself (`tokenrelay call GET URL --no-auth`): each control answer comes after its effect.

POST /token  grant_type=refresh_token: a refresh token issued and not spent yet (SEED at first)
             is spent and answered with access token "at-N", refresh token "rt-N" and
             expires_in 1 (due for renewal at once); any other (a replay) gets 400 invalid_grant
             and is counted. With --hold-first-refresh, the first refresh records event "held"
             and is answered only after /control/release; with --hold-refresh N, the Nth accepted
             refresh does.
             grant_type=client_credentials: access token "at-N", expires_in 3600.
GET|POST /api/...  200 {"ok": true, "token": "at-N"} for a live access token (its name only);
             401 with WWW-Authenticate: Bearer error="invalid_token" for a revoked or unknown one.
/control/await?event=E  answers 200 once event E was recorded (504 after 120 s: a safety net)
/control/release        lets the held refresh be answered
/control/revoke         revokes every access token issued so far
/control/stats          {"reuses": N, "refreshes": [the refresh tokens presented, in order]}
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

lock = threading.Condition()
live_refresh = {sys.argv[1]}
live_access = set()
counter = [0]
# How many accepted refreshes until the held one (0: none is held).
hold = [1 if "--hold-first-refresh" in sys.argv[2:] else 0]
if "--hold-refresh" in sys.argv[2:]:
    hold[0] = int(sys.argv[sys.argv.index("--hold-refresh") + 1])
released = threading.Event()
events = set()
reuses = [0]
refreshes = []


def event(name):
    with lock:
        events.add(name)
        lock.notify_all()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def token(self):
        form = parse_qs(self.body().decode())
        grant = form.get("grant_type", [""])[0]
        with lock:
            counter[0] += 1
            number = counter[0]
            if grant == "client_credentials":
                access = "at-%d" % number
                live_access.add(access)
                answer = {"access_token": access, "token_type": "Bearer", "expires_in": 3600}
                return self.reply(200, json.dumps(answer).encode())
            refresh = form.get("refresh_token", [""])[0]
            refreshes.append(refresh)
            if grant != "refresh_token" or refresh not in live_refresh:
                reuse = True
            else:
                reuse = False
                live_refresh.discard(refresh)
                access, rotated = "at-%d" % number, "rt-%d" % number
                live_access.add(access)
                live_refresh.add(rotated)
                held = hold[0] == 1
                hold[0] = max(hold[0] - 1, 0)
        if reuse:
            with lock:
                reuses[0] += 1
            return self.reply(400, b'{"error": "invalid_grant"}')
        if held:
            event("held")
            released.wait(120)
        answer = {"access_token": access, "refresh_token": rotated, "token_type": "Bearer", "expires_in": 1}
        self.reply(200, json.dumps(answer).encode())

    def api(self):
        self.body()
        authorization = self.headers.get("Authorization", "")
        access = authorization[len("Bearer "):] if authorization.startswith("Bearer ") else ""
        with lock:
            live = access in live_access
        if not live:
            return self.reply(401, b"{}", [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        self.reply(200, json.dumps({"ok": True, "token": access}).encode())

    def control(self, path, query):
        self.body()
        if path == "/control/await":
            name = query.get("event", [""])[0]
            with lock:
                found = lock.wait_for(lambda: name in events, 120)
            return self.reply(200 if found else 504, b"{}")
        if path == "/control/release":
            released.set()
        elif path == "/control/revoke":
            with lock:
                live_access.clear()
        elif path == "/control/stats":
            with lock:
                stats = {"reuses": reuses[0], "refreshes": list(refreshes)}
            return self.reply(200, json.dumps(stats).encode())
        self.reply(200, b"{}")

    def route(self):
        path, _, query = self.path.partition("?")
        if path.startswith("/control/"):
            return self.control(path, parse_qs(query))
        if self.command == "POST" and path.endswith("/token"):
            return self.token()
        self.api()

    def do_POST(self):
        self.route()

    def do_GET(self):
        self.route()


class Server(ThreadingHTTPServer):
    daemon_threads = True


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

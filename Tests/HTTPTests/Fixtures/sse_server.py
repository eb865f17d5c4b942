#!/usr/bin/python3
"""Server-Sent-Events test server for the EventSource tests (standard library only).

Prints its port on the first stdout line, then serves until killed. Every route takes key=K:
requests, the Last-Event-ID and Authorization values they carried, and events written are
recorded per key and read back from /stats?key=K.

  /events?key=K&drop_after=N&end_after=N&retry=MS&fail=N&code=C&retry_after=S
          &expired=V1,V2&uses=N&content_type=T&huge_after=N&stall_after=N&pad=B
      The first `fail` requests of K get status C (default 500; with Retry-After: S if given).
      With an Authorization `Bearer tok-V`: V in `expired`, or a token already used for `uses`
      connections, gets 401 with WWW-Authenticate: Bearer error="invalid_token".
      Otherwise 200 text/event-stream (or content_type), chunked: events with consecutive ids
      from Last-Event-ID + 1 (or 1), data "event <id>" padded with `pad` bytes; `retry: MS`
      in the first event's block; after `drop_after` events the connection is closed
      abruptly (no final chunk); after `end_after` events the body ends cleanly; after
      `huge_after` events a line of 4096 bytes is sent; after `stall_after` events nothing
      more is sent until the client closes. Without a limit the stream is infinite; when a
      write cannot proceed for 0.3 s, "blocked" is recorded (the client applies
      back-pressure). "closed" is recorded when the client closes a stream.
  /status/C?key=K   status C with a short body
  /stats?key=K      JSON {requests, last_event_ids, authorizations, accepts, cache_controls,
                    written, events}
  /await?key=K&event=E   blocks until E was recorded for K (120 s max, a safety net: tests wait on events, not time): 200 or 504
"""
import json
import select
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

cond = threading.Condition()
stats = {}
token_uses = {}


def entry(key):
    return stats.setdefault(
        key, {"requests": 0, "last_event_ids": [], "authorizations": [], "accepts": [], "cache_controls": [],
         "written": 0, "events": []}
    )


def record(key, name):
    with cond:
        entry(key)["events"].append(name)
        cond.notify_all()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if status != 204:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        key = query.get("key", "default")
        route = parts.path
        if route == "/stats":
            with cond:
                body = json.dumps(entry(key)).encode()
            self.reply(200, body, [("Content-Type", "application/json")])
            return
        if route == "/await":
            name = query.get("event", "")
            with cond:
                ok = cond.wait_for(lambda: name in entry(key)["events"], timeout=120)
            self.reply(200 if ok else 504, b"")
            return
        with cond:
            e = entry(key)
            e["requests"] += 1
            count = e["requests"]
            e["last_event_ids"].append(self.headers.get("Last-Event-ID"))
            e["authorizations"].append(self.headers.get("Authorization"))
            e["accepts"].append(self.headers.get("Accept"))
            e["cache_controls"].append(self.headers.get("Cache-Control"))
        if route.startswith("/status/"):
            code = int(route[len("/status/"):])
            self.reply(code, b"" if code in (204, 304) else b"status body")
            return
        if route == "/events":
            self.events(key, count, query)
            return
        self.reply(404, b"")

    def events(self, key, count, query):
        if count <= int(query.get("fail", "0")):
            headers = [("Retry-After", query["retry_after"])] if "retry_after" in query else []
            self.reply(int(query.get("code", "500")), b"failing", headers)
            return
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Bearer tok-"):
            version = auth[len("Bearer tok-"):]
            expired = query.get("expired", "").split(",")
            with cond:
                uses = token_uses.get((key, version), 0)
                over = "uses" in query and uses >= int(query["uses"])
                if not (version in expired or over):
                    token_uses[(key, version)] = uses + 1
            if version in expired or over:
                self.reply(401, b"expired", [("WWW-Authenticate", 'Bearer error="invalid_token"')])
                return
        last = self.headers.get("Last-Event-ID")
        next_id = int(last) + 1 if last and last.isdigit() else 1
        self.send_response(200)
        self.send_header("Content-Type", query.get("content_type", "text/event-stream"))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        pad = "x" * int(query.get("pad", "0"))
        limits = {name: int(query[name]) for name in ("drop_after", "end_after", "huge_after", "stall_after") if name in query}
        sent = 0
        try:
            while True:
                if sent == limits.get("drop_after", -1):
                    sock.shutdown(socket.SHUT_RDWR)
                    return
                if sent == limits.get("end_after", -1):
                    self.write(sock, key, b"", count=False)
                    return
                if sent == limits.get("huge_after", -1):
                    self.write(sock, key, b"data: " + b"y" * 4096 + b"\n\n", count=False)
                    self.wait_closed(sock, key)
                    return
                if sent == limits.get("stall_after", -1):
                    self.wait_closed(sock, key)
                    return
                block = ""
                if sent == 0 and "retry" in query:
                    block += "retry: %s\n" % query["retry"]
                block += "id: %d\ndata: event %d%s\n\n" % (next_id, next_id, pad)
                self.write(sock, key, block.encode())
                next_id += 1
                sent += 1
        except (BrokenPipeError, ConnectionResetError, OSError):
            record(key, "closed")

    def write(self, sock, key, payload, count=True):
        """Writes one chunk, recording "blocked" when the socket stays unwritable for 0.3 s."""
        frame = b"%x\r\n%s\r\n" % (len(payload), payload)
        _, writable, _ = select.select([], [sock], [], 0.3)
        if not writable:
            record(key, "blocked")
        sock.sendall(frame)
        if count:
            with cond:
                entry(key)["written"] += 1

    def wait_closed(self, sock, key):
        """Sends nothing more; returns when the client closes the connection (300 s max)."""
        sock.settimeout(300)
        try:
            while sock.recv(1024):
                pass
        except OSError:
            pass
        record(key, "closed")


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

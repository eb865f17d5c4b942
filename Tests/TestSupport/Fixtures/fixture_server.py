#!/usr/bin/python3
"""The loopback HTTP/1.1 fixture server the Swift test targets share (standard library only).

Usage: fixture_server.py ROLE [ARGS]
Its first stdout line is the "listening" line: the ports, printed once every listener accepts
connections (Tests/TestSupport/FixtureServer.swift waits for it). It then serves until killed.
Every role has a MAIN listener whose routes are below; /await?event=E blocks until event E was
recorded (120 s max, a safety net: tests wait on events, not time) and answers 200 or 504.

ROLE transport (HTTPTests, the libcurl transport): prints "MAIN OTHER CLOSED TLS".
  OTHER counts every request it receives (a redirect target that must never be contacted);
  CLOSED is bound but never listening (connection refused); TLS serves MAIN's routes over TLS
  with test_cert.pem (self-signed, 127.0.0.1; test material only, its key is test_key.pem).
  /echo                 JSON {method, path (with query), headers: [[name, value]...], body: base64}
  /headers              like /echo, but the body field is the body's length (as text)
  /status/<code>        that status, body "status <code>"
  /redirect             302 to OTHER's /contacted
  /other-hits           JSON {hits: n} requests OTHER received
  /set-cookie           200 with Set-Cookie: session=s3cr3t
  /basic-401            401 with WWW-Authenticate: Basic realm="test"
  /slow?id=X            records started-X, then waits (300 s max) for the client to close the
                        connection, records closed-X
  /large?bytes=N        N bytes with Content-Length
  /gather?key=K&n=N     records gathered-K and holds each request until N were recorded (120 s
                        max, then 504), then answers each with the client port of its connection
  /large-chunked?bytes=N  N bytes, chunked, no Content-Length
  /stream?bytes=N&chunk=C&delay_ms=D&stall=1&id=X
                        chunked body of N bytes (byte i = i % 251) in C-byte chunks, D ms apart;
                        with stall=1 keeps the connection open afterwards without sending;
                        records closed-stream-X when the client closes it

ROLE events (HTTPTests, EventSource): prints "PORT". Every route takes key=K: requests, the
  Last-Event-ID and Authorization values they carried, and events written are recorded per key
  and read back from /stats?key=K; /await takes key=K too.
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

ROLE recording LOG (EndToEndTests, `request`): prints "MAIN OTHER CLOSED".
  Every request either MAIN or OTHER receives is appended to LOG as one JSON line
  {server: "main"|"other", method, path, query (raw), headers: [[name, value]...], body (base64)}
  BEFORE the response is written, so a test that has the response can read the record. Events
  (`started-X`, `closed-X`) are appended as {event: name}. OTHER answers every request with
  200 "other"; MAIN's routes are also under an /api prefix:
  /echo                 JSON of the request as recorded
  /reflect              the request body back, with the request's Content-Type
  /binary               256 bytes 0..255, application/octet-stream
  /large?bytes=N        N bytes of "x" (text/plain) with Content-Length
  /status/<code>        that status, text body "status <code>"
  /redirect             302 to OTHER's /contacted
  /set-cookie           200 with Set-Cookie: session=s3cr3t (twice, two cookies)
  /slow?id=X            records started-X, waits (30 s max) for the client to close the
                        connection, records closed-X
  /await?event=E        (&timeout=S for another bound than 120 s) its arrival is logged as
                        {event: "waiting-E"} (not as a request)
  /mark?event=E         records event E (waking its /await requests) and answers 200
"""
import base64
import json
import os
import select
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- shared by every role ------------------------------------------------------------------


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the client went away on purpose (limits, cancellation)
        super().handle_error(request, client_address)


class Events:
    """Named events in the order recorded; a waiter blocks until one is recorded."""

    def __init__(self, on_record=None):
        self.names = []
        self.cond = threading.Condition()
        self.on_record = on_record

    def record(self, name):
        if self.on_record:
            self.on_record(name)
        with self.cond:
            self.names.append(name)
            self.cond.notify_all()

    def wait(self, name, timeout=120.0, count=1):
        """True once `name` was recorded `count` times (False when `timeout` ran out first)."""
        with self.cond:
            return self.cond.wait_for(lambda: self.names.count(name) >= count, timeout=timeout)


class Handler(BaseHTTPRequestHandler):
    """Routes of one role; `reply` sends a whole answer with a Content-Length."""

    protocol_version = "HTTP/1.1"
    default_content_type = None  # sent when an answer names none
    length_on_no_content = True  # whether 204 answers carry a Content-Length
    body_on_head = False

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        names = set()
        for name, value in headers:
            names.add(name.lower())
            self.send_header(name, value)
        if self.default_content_type and "content-type" not in names:
            self.send_header("Content-Type", self.default_content_type)
        if status != 204 or self.length_on_no_content:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" or self.body_on_head:
            self.wfile.write(body)

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def header_pairs(self):
        return [[k, v] for k, v in self.headers.items()]

    def wait_client_close(self, seconds):
        """Sends nothing; True when the client closed the connection within `seconds` (False when
        the time ran out or the client sent something instead)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], min(1.0, max(0.0, deadline - time.monotonic())))
            if readable:
                try:
                    data = self.connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    self.close_connection = True
                    return True
                return False
        return False

    def slow(self, ident, events, seconds, body):
        """/slow?id=X: records started-X, waits for the client to close (closed-X) or answers `body`."""
        events.record("started-" + ident)
        if self.wait_client_close(seconds):
            events.record("closed-" + ident)
            return
        self.reply(200, body)

    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")

    def start_chunked(self, content_type=None):
        self.send_response(200)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()


def closed_port():
    """A port bound but never listening, kept open: connections are refused, and no other process
    on the machine can take the port while the server runs (a closed probe's port can be)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    KEEP.append(sock)
    return sock.getsockname()[1]


def serve(servers, first_line):
    """Serves every listener on threads of its own, then prints the listening line."""
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(first_line, flush=True)
    threading.Event().wait()


KEEP = []


# ---- role transport ------------------------------------------------------------------------


class Transport:
    events = Events()
    other_hits = [0]
    other_port = 0


class TransportOther(Handler):
    def handle_any(self):
        Transport.other_hits[0] += 1
        self.reply(200, b"hi")

    do_GET = do_POST = handle_any


class TransportMain(Handler):
    def handle_any(self):
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        body = self.read_body()
        route = parts.path
        events = Transport.events
        if route == "/echo":
            doc = {"method": self.command, "path": self.path, "headers": self.header_pairs(),
                   "body": base64.b64encode(body).decode()}
            self.reply(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])
        elif route == "/headers":
            doc = {"method": self.command, "path": self.path, "headers": self.header_pairs(),
                   "body": base64.b64encode(str(len(body)).encode()).decode()}
            self.reply(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])
        elif route.startswith("/status/"):
            code = int(route[len("/status/"):])
            self.reply(code, f"status {code}".encode(), [("Content-Type", "text/plain")])
        elif route == "/redirect":
            self.reply(302, b"", [("Location", f"http://127.0.0.1:{Transport.other_port}/contacted")])
        elif route == "/other-hits":
            self.reply(200, json.dumps({"hits": Transport.other_hits[0]}).encode())
        elif route == "/set-cookie":
            self.reply(200, b"ok", [("Set-Cookie", "session=s3cr3t; Path=/")])
        elif route == "/basic-401":
            self.reply(401, b"unauthorized", [("WWW-Authenticate", 'Basic realm="test"')])
        elif route == "/slow":
            self.slow(query.get("id", ["x"])[0], events, 300, b"slow")
        elif route == "/await":
            ok = events.wait(query.get("event", [""])[0])
            self.reply(200 if ok else 504, b"")
        elif route == "/large":
            self.reply(200, b"x" * int(query.get("bytes", ["0"])[0]))
        elif route == "/gather":
            name = "gathered-" + query.get("key", [""])[0]
            events.record(name)
            ok = events.wait(name, count=int(query.get("n", ["1"])[0]))
            self.reply(200 if ok else 504, str(self.client_address[1]).encode(), [("Content-Type", "text/plain")])
        elif route == "/large-chunked":
            data = b"x" * int(query.get("bytes", ["0"])[0])
            self.start_chunked()
            try:
                for start in range(0, len(data), 65536):
                    self.write_chunk(data[start:start + 65536])
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.close_connection = True
        elif route == "/stream":
            self.stream(query)
        else:
            self.reply(404, b"no route")

    def stream(self, query):
        total = int(query.get("bytes", ["0"])[0])
        chunk = int(query.get("chunk", ["1024"])[0])
        delay = int(query.get("delay_ms", ["0"])[0]) / 1000.0
        stall = query.get("stall", ["0"])[0] == "1"
        ident = query.get("id", ["x"])[0]
        self.start_chunked("application/octet-stream")
        self.wfile.flush()
        pattern = bytes(i % 251 for i in range(251)) * (chunk // 251 + 2)
        sent = 0
        try:
            while sent < total:
                size = min(chunk, total - sent)
                offset = sent % 251
                self.write_chunk(pattern[offset:offset + size])
                self.wfile.flush()
                sent += size
                if delay:
                    time.sleep(delay)
            if stall:
                readable, _, _ = select.select([self.connection], [], [], 300)
                if readable:
                    Transport.events.record("closed-stream-" + ident)
                self.close_connection = True
                return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            Transport.events.record("closed-stream-" + ident)
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any


def run_transport(_arguments):
    main_server = Server(("127.0.0.1", 0), TransportMain)
    other_server = Server(("127.0.0.1", 0), TransportOther)
    Transport.other_port = other_server.server_address[1]
    refused = closed_port()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(HERE, "test_cert.pem"), os.path.join(HERE, "test_key.pem"))
    tls_server = Server(("127.0.0.1", 0), TransportMain)
    tls_server.socket = context.wrap_socket(tls_server.socket, server_side=True, do_handshake_on_connect=False)
    ports = [main_server.server_address[1], Transport.other_port, refused, tls_server.server_address[1]]
    serve([main_server, other_server, tls_server], " ".join(str(port) for port in ports))


# ---- role events ---------------------------------------------------------------------------


class EventStreams:
    cond = threading.Condition()
    stats = {}
    token_uses = {}

    @classmethod
    def entry(cls, key):
        """The record of key K (call with `cond` held)."""
        if key not in cls.stats:
            cls.stats[key] = {"requests": 0, "last_event_ids": [], "authorizations": [], "accepts": [],
                              "cache_controls": [], "written": 0, "events": Events()}
        return cls.stats[key]


class EventsMain(Handler):
    length_on_no_content = False
    body_on_head = True

    def do_GET(self):
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        key = query.get("key", "default")
        route = parts.path
        with EventStreams.cond:
            entry = EventStreams.entry(key)
        if route == "/stats":
            with EventStreams.cond, entry["events"].cond:
                doc = dict(entry, events=list(entry["events"].names))
                body = json.dumps(doc).encode()
            self.reply(200, body, [("Content-Type", "application/json")])
            return
        if route == "/await":
            ok = entry["events"].wait(query.get("event", ""))
            self.reply(200 if ok else 504, b"")
            return
        with EventStreams.cond:
            entry["requests"] += 1
            count = entry["requests"]
            entry["last_event_ids"].append(self.headers.get("Last-Event-ID"))
            entry["authorizations"].append(self.headers.get("Authorization"))
            entry["accepts"].append(self.headers.get("Accept"))
            entry["cache_controls"].append(self.headers.get("Cache-Control"))
        if route.startswith("/status/"):
            code = int(route[len("/status/"):])
            self.reply(code, b"" if code in (204, 304) else b"status body")
            return
        if route == "/events":
            self.events(key, entry, count, query)
            return
        self.reply(404, b"")

    def events(self, key, entry, count, query):
        if count <= int(query.get("fail", "0")):
            headers = [("Retry-After", query["retry_after"])] if "retry_after" in query else []
            self.reply(int(query.get("code", "500")), b"failing", headers)
            return
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Bearer tok-"):
            version = auth[len("Bearer tok-"):]
            expired = query.get("expired", "").split(",")
            with EventStreams.cond:
                uses = EventStreams.token_uses.get((key, version), 0)
                over = "uses" in query and uses >= int(query["uses"])
                if not (version in expired or over):
                    EventStreams.token_uses[(key, version)] = uses + 1
            if version in expired or over:
                self.reply(401, b"expired", [("WWW-Authenticate", 'Bearer error="invalid_token"')])
                return
        last = self.headers.get("Last-Event-ID")
        next_id = int(last) + 1 if last and last.isdigit() else 1
        self.start_chunked(query.get("content_type", "text/event-stream"))
        self.wfile.flush()
        sock = self.connection
        pad = "x" * int(query.get("pad", "0"))
        limits = {name: int(query[name]) for name in ("drop_after", "end_after", "huge_after", "stall_after")
                  if name in query}
        events = entry["events"]
        sent = 0
        try:
            while True:
                if sent == limits.get("drop_after", -1):
                    sock.shutdown(socket.SHUT_RDWR)
                    return
                if sent == limits.get("end_after", -1):
                    self.write(sock, entry, b"", count=False)
                    return
                if sent == limits.get("huge_after", -1):
                    self.write(sock, entry, b"data: " + b"y" * 4096 + b"\n\n", count=False)
                    self.wait_closed(sock, events)
                    return
                if sent == limits.get("stall_after", -1):
                    self.wait_closed(sock, events)
                    return
                block = ""
                if sent == 0 and "retry" in query:
                    block += "retry: %s\n" % query["retry"]
                block += "id: %d\ndata: event %d%s\n\n" % (next_id, next_id, pad)
                self.write(sock, entry, block.encode())
                next_id += 1
                sent += 1
        except (BrokenPipeError, ConnectionResetError, OSError):
            events.record("closed")

    def write(self, sock, entry, payload, count=True):
        """Writes one chunk, recording "blocked" when the socket stays unwritable for 0.3 s."""
        frame = b"%x\r\n%s\r\n" % (len(payload), payload)
        _, writable, _ = select.select([], [sock], [], 0.3)
        if not writable:
            entry["events"].record("blocked")
        sock.sendall(frame)
        if count:
            with EventStreams.cond:
                entry["written"] += 1

    def wait_closed(self, sock, events):
        """Sends nothing more; returns when the client closes the connection (300 s max)."""
        sock.settimeout(300)
        try:
            while sock.recv(1024):
                pass
        except OSError:
            pass
        events.record("closed")


def run_events(_arguments):
    server = Server(("127.0.0.1", 0), EventsMain)
    serve([server], str(server.server_address[1]))


# ---- role recording ------------------------------------------------------------------------


class Recording:
    log_lock = threading.Lock()
    log_path = ""
    other_port = 0

    @classmethod
    def append(cls, record):
        with cls.log_lock:
            with open(cls.log_path, "a") as f:
                f.write(json.dumps(record) + "\n")
                f.flush()

    events = Events(on_record=lambda name: Recording.append({"event": name}))


class RecordingMain(Handler):
    disable_nagle_algorithm = True  # head and body are separate writes: no 40 ms delayed-ACK stall
    default_content_type = "text/plain; charset=utf-8"
    server_name = "main"

    def handle_any(self):
        body = self.read_body()
        parts = urlsplit(self.path)
        record = {"server": self.server_name, "method": self.command, "path": parts.path, "query": parts.query,
                  "headers": self.header_pairs(), "body": base64.b64encode(body).decode()}
        route = parts.path
        if route.startswith("/api/"):
            route = route[len("/api"):]  # environments with a base path reach the same routes
        if route != "/await":
            Recording.append(record)
        if self.server_name == "other":
            return self.reply(200, b"other")
        query = parse_qs(parts.query)
        events = Recording.events
        if route == "/echo":
            self.reply(200, json.dumps(record).encode(), [("Content-Type", "application/json")])
        elif route == "/reflect":
            self.reply(200, body, [("Content-Type", self.headers.get("Content-Type") or "application/octet-stream")])
        elif route == "/binary":
            self.reply(200, bytes(range(256)), [("Content-Type", "application/octet-stream")])
        elif route == "/large":
            self.reply(200, b"x" * int(query.get("bytes", ["0"])[0]))
        elif route.startswith("/status/"):
            code = int(route.split("/")[2])
            self.reply(code, ("status %d" % code).encode())
        elif route == "/redirect":
            self.reply(302, b"", [("Location", "http://127.0.0.1:%d/contacted" % Recording.other_port)])
        elif route == "/set-cookie":
            self.reply(200, b"cookie set", [("Set-Cookie", "session=s3cr3t; Path=/"), ("Set-Cookie", "theme=dark")])
        elif route == "/slow":
            self.slow(query.get("id", ["x"])[0], events, 30, b"slow done")
        elif route == "/mark":
            events.record(query.get("event", [""])[0])
            self.reply(200, b"marked")
        elif route == "/await":
            name = query.get("event", [""])[0]
            Recording.append({"event": "waiting-" + name})
            found = events.wait(name, timeout=float(query.get("timeout", ["120"])[0]))
            self.reply(200 if found else 504, b"seen" if found else b"not seen")
        else:
            self.reply(404, b"no such route")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = handle_any


class RecordingOther(RecordingMain):
    server_name = "other"


def run_recording(arguments):
    Recording.log_path = arguments[0]
    main_server = Server(("127.0.0.1", 0), RecordingMain)
    other_server = Server(("127.0.0.1", 0), RecordingOther)
    Recording.other_port = other_server.server_address[1]
    refused = closed_port()
    serve([main_server, other_server], "%d %d %d" % (main_server.server_address[1], Recording.other_port, refused))


ROLES = {"transport": run_transport, "events": run_events, "recording": run_recording}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ROLES:
        sys.exit("usage: fixture_server.py transport|events|recording [LOG]")
    ROLES[sys.argv[1]](sys.argv[2:])

#!/usr/bin/python3
"""Recording HTTP/1.1 test server for the HTTP transport tests (standard library only).

Prints "MAIN_PORT OTHER_PORT CLOSED_PORT TLS_PORT" on its first stdout line, then serves until
killed: MAIN serves the routes below; OTHER records every request it receives (a redirect target
that must never be contacted); CLOSED_PORT had a listener that is now closed (connection
refused); TLS_PORT serves MAIN's routes over TLS with test_cert.pem (self-signed, 127.0.0.1;
test material only, its key is test_key.pem).

Routes on MAIN:
  /echo                 JSON {method, path, headers: [[name, value]...], body: base64}
  /headers              like /echo, but the body field is the body's length (as text)
  /status/<code>        that status, body "status <code>"
  /redirect             302 to OTHER's /contacted
  /other-hits           JSON {hits: n} requests OTHER received
  /set-cookie           200 with Set-Cookie: session=s3cr3t
  /basic-401            401 with WWW-Authenticate: Basic realm="test"
  /slow?id=X            records started-X, then waits (300 s max) for the client to close the
                        connection, records closed-X
  /await?event=E        blocks until event E was recorded (120 s max, a safety net: tests wait on events, not time): 200 or 504
  /large?bytes=N        N bytes with Content-Length
  /large-chunked?bytes=N  N bytes, chunked, no Content-Length
  /stream?bytes=N&chunk=C&delay_ms=D&stall=1&id=X
                        chunked body of N bytes (byte i = i % 251) in C-byte chunks, D ms apart;
                        with stall=1 keeps the connection open afterwards without sending;
                        records closed-stream-X when the client closes it
"""
import base64
import json
import select
import os
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

events = set()
events_cond = threading.Condition()
other_hits = [0]


def record(name):
    with events_cond:
        events.add(name)
        events_cond.notify_all()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the client went away on purpose (limits, cancellation)
        super().handle_error(request, client_address)


class Other(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_one_request(self):
        super().handle_one_request()

    def do_GET(self):
        other_hits[0] += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"hi")

    do_POST = do_GET


class Main(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        route = parts.path
        if route == "/echo":
            doc = {
                "method": self.command,
                "path": self.path,
                "headers": [[k, v] for k, v in self.headers.items()],
                "body": base64.b64encode(body).decode(),
            }
            self.reply(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])
        elif route == "/headers":
            doc = {"method": self.command, "path": self.path, "headers": [[k, v] for k, v in self.headers.items()],
                   "body": base64.b64encode(str(len(body)).encode()).decode()}
            self.reply(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])
        elif route.startswith("/status/"):
            code = int(route[len("/status/"):])
            self.reply(code, f"status {code}".encode(), [("Content-Type", "text/plain")])
        elif route == "/redirect":
            self.reply(302, b"", [("Location", f"http://127.0.0.1:{OTHER_PORT}/contacted")])
        elif route == "/other-hits":
            self.reply(200, json.dumps({"hits": other_hits[0]}).encode())
        elif route == "/set-cookie":
            self.reply(200, b"ok", [("Set-Cookie", "session=s3cr3t; Path=/")])
        elif route == "/basic-401":
            self.reply(401, b"unauthorized", [("WWW-Authenticate", 'Basic realm="test"')])
        elif route == "/slow":
            ident = query.get("id", ["x"])[0]
            record("started-" + ident)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                readable, _, _ = select.select([self.connection], [], [], 1.0)
                if readable:
                    try:
                        data = self.connection.recv(1, socket.MSG_PEEK)
                    except OSError:
                        data = b""
                    if not data:
                        record("closed-" + ident)
                        self.close_connection = True
                        return
            self.reply(200, b"slow")
        elif route == "/await":
            name = query.get("event", [""])[0]
            with events_cond:
                ok = events_cond.wait_for(lambda: name in events, timeout=120)
            self.reply(200 if ok else 504, b"")
        elif route == "/large":
            count = int(query.get("bytes", ["0"])[0])
            self.reply(200, b"x" * count)
        elif route == "/large-chunked":
            count = int(query.get("bytes", ["0"])[0])
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.write_chunks(b"x" * count, 65536)
        elif route == "/stream":
            total = int(query.get("bytes", ["0"])[0])
            chunk = int(query.get("chunk", ["1024"])[0])
            delay = int(query.get("delay_ms", ["0"])[0]) / 1000.0
            stall = query.get("stall", ["0"])[0] == "1"
            ident = query.get("id", ["x"])[0]
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            pattern = bytes(i % 251 for i in range(251)) * (chunk // 251 + 2)
            sent = 0
            try:
                while sent < total:
                    size = min(chunk, total - sent)
                    offset = sent % 251
                    data = pattern[offset:offset + size]
                    self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
                    self.wfile.flush()
                    sent += size
                    if delay:
                        time.sleep(delay)
                if stall:
                    readable, _, _ = select.select([self.connection], [], [], 300)
                    if readable:
                        record("closed-stream-" + ident)
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                record("closed-stream-" + ident)
                self.close_connection = True
        else:
            self.reply(404, b"no route")

    def write_chunks(self, data, size):
        try:
            for start in range(0, len(data), size):
                piece = data[start:start + size]
                self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any


def main():
    global OTHER_PORT
    main_server = Server(("127.0.0.1", 0), Main)
    other_server = Server(("127.0.0.1", 0), Other)
    OTHER_PORT = other_server.server_address[1]
    # Bound but never listening, and kept open: connections are refused, and no other process
    # on the machine can take the port while the server runs (a closed probe's port can be).
    global CLOSED_SOCKET
    CLOSED_SOCKET = socket.socket()
    CLOSED_SOCKET.bind(("127.0.0.1", 0))
    closed_port = CLOSED_SOCKET.getsockname()[1]
    here = os.path.dirname(os.path.abspath(__file__))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(here, "test_cert.pem"), os.path.join(here, "test_key.pem"))
    tls_server = Server(("127.0.0.1", 0), Main)
    tls_server.socket = context.wrap_socket(tls_server.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=other_server.serve_forever, daemon=True).start()
    threading.Thread(target=tls_server.serve_forever, daemon=True).start()
    ports = [main_server.server_address[1], OTHER_PORT, closed_port, tls_server.server_address[1]]
    print(" ".join(str(port) for port in ports), flush=True)
    main_server.serve_forever()


OTHER_PORT = 0
if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Recording HTTP/1.1 server for the end-to-end tests of `request` (standard library only).

Usage: recording_server.py LOG_PATH
Prints "MAIN_PORT OTHER_PORT CLOSED_PORT" on its first stdout line, then serves until killed.
Every request either server receives is appended to LOG_PATH as one JSON line
{server: "main"|"other", method, path, query (raw), headers: [[name, value]...], body (base64)}
BEFORE the response is written, so a test that has the response can read the record. Events
(`started-X`, `closed-X`) are appended as {event: name}.

Routes on MAIN (also under an /api prefix; OTHER answers every request with 200 "other"):
  /echo                 JSON of the request as recorded
  /reflect              the request body back, with the request's Content-Type
  /binary               256 bytes 0..255, application/octet-stream
  /large?bytes=N        N bytes of "x" (text/plain) with Content-Length
  /status/<code>        that status, text body "status <code>"
  /redirect             302 to OTHER's /contacted
  /set-cookie           200 with Set-Cookie: session=s3cr3t (twice, two cookies)
  /slow?id=X            records started-X, waits (30 s max) for the client to close the
                        connection, records closed-X
  /await?event=E        blocks until event E was recorded (120 s max, a safety net: tests wait on events,
                        not time; &timeout=S for another bound): 200 or 504; its arrival is logged as
                        {event: "waiting-E"} (not as a request)
  /mark?event=E         records event E (waking its /await requests) and answers 200
"""
import base64
import json
import select
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

log_lock = threading.Lock()
events = set()
events_cond = threading.Condition()
log_path = sys.argv[1]


def append(record):
    with log_lock:
        with open(log_path, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()


def record_event(name):
    append({"event": name})
    with events_cond:
        events.add(name)
        events_cond.notify_all()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class Recording(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # head and body are separate writes: no 40 ms delayed-ACK stall
    server_name = "main"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        names = set()
        for name, value in headers:
            names.add(name.lower())
            self.send_header(name, value)
        if "content-type" not in names:
            self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_record(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        record = {
            "server": self.server_name,
            "method": self.command,
            "path": parts.path,
            "query": parts.query,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": base64.b64encode(body).decode(),
        }
        return parts, body, record

    def handle_any(self):
        parts, body, record = self.read_record()
        route = parts.path
        if route.startswith("/api/"):
            route = route[len("/api"):]  # environments with a base path reach the same routes
        if route != "/await":
            append(record)
        if self.server_name == "other":
            return self.reply(200, b"other")
        query = parse_qs(parts.query)
        if route == "/echo":
            self.reply(200, json.dumps(record).encode(), [("Content-Type", "application/json")])
        elif route == "/reflect":
            self.reply(200, body, [("Content-Type", self.headers.get("Content-Type") or "application/octet-stream")])
        elif route == "/binary":
            self.reply(200, bytes(range(256)), [("Content-Type", "application/octet-stream")])
        elif route == "/large":
            size = int(query.get("bytes", ["0"])[0])
            self.reply(200, b"x" * size)
        elif route.startswith("/status/"):
            code = int(route.split("/")[2])
            self.reply(code, ("status %d" % code).encode())
        elif route == "/redirect":
            self.reply(302, b"", [("Location", "http://127.0.0.1:%d/contacted" % OTHER_PORT)])
        elif route == "/set-cookie":
            self.reply(200, b"cookie set", [("Set-Cookie", "session=s3cr3t; Path=/"), ("Set-Cookie", "theme=dark")])
        elif route == "/slow":
            ident = query.get("id", ["x"])[0]
            record_event("started-" + ident)
            sock = self.connection
            readable, _, _ = select.select([sock], [], [], 30)
            if readable:
                try:
                    data = sock.recv(1)
                except OSError:
                    data = b""
                if not data:
                    record_event("closed-" + ident)
                    self.close_connection = True
                    return
            self.reply(200, b"slow done")
        elif route == "/mark":
            record_event(query.get("event", [""])[0])
            self.reply(200, b"marked")
        elif route == "/await":
            name = query.get("event", [""])[0]
            append({"event": "waiting-" + name})
            with events_cond:
                found = events_cond.wait_for(lambda: name in events, timeout=float(query.get("timeout", ["120"])[0]))
            self.reply(200 if found else 504, b"seen" if found else b"not seen")
        else:
            self.reply(404, b"no such route")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = handle_any


class OtherRecording(Recording):
    server_name = "other"


def main():
    global OTHER_PORT
    main_server = Server(("127.0.0.1", 0), Recording)
    other_server = Server(("127.0.0.1", 0), OtherRecording)
    OTHER_PORT = other_server.server_address[1]
    # Bound but never listening, and kept open: connections are refused, and no other process
    # on the machine can take the port while the server runs (a closed probe's port can be).
    global CLOSED_SOCKET
    CLOSED_SOCKET = socket.socket()
    CLOSED_SOCKET.bind(("127.0.0.1", 0))
    closed_port = CLOSED_SOCKET.getsockname()[1]
    for server in (main_server, other_server):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(main_server.server_address[1], OTHER_PORT, closed_port, flush=True)
    threading.Event().wait()


OTHER_PORT = 0
if __name__ == "__main__":
    main()

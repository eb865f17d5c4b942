#!/usr/bin/python3
"""Loopback listeners that record what arrives ON THE WIRE (standard library only), for the
hostile-input end-to-end tests: origin confusion, request smuggling, proxies, private CAs.

Usage: wire_server.py LOG_PATH NAME[:tls] [NAME[:tls] ...] [--cert CERT --key KEY]
Prints one line "NAME=PORT NAME=PORT ..." once every listener is bound, then serves until killed.

Each listener appends JSON lines to LOG_PATH (flushed before any answer is written):
  {"listener", "event": "accept", "conn"}            every TCP connection accepted
  {"listener", "event": "tls", "conn", "ok"}         TLS listeners: the handshake's outcome
  {"listener", "event": "raw", "conn", "bytes"}      every chunk received (base64)
  {"listener", "event": "request", "conn", "seq", "method", "target", "headers", "body"}
                                                     every HTTP/1.1 request parsed (keep-alive,
                                                     pipelining: framed by Content-Length only,
                                                     as a server trusting the client's framing)
Answers (keep-alive):
  POST .../token        200 {"access_token": "tok-<listener>-<seq>", "token_type": "Bearer",
                        "expires_in": 3600}
  .../reject-first/...  401 with `WWW-Authenticate: Bearer error="invalid_token"` while the request
                        carries the Authorization value the first such request carried (an expired
                        token); otherwise answered like any other path
  GET  .../events       200 text/event-stream with one event (id 1, data "hello"), then closes
  anything else         200 application/json {"listener", "conn", "seq", "method", "target"} — the
                        caller sees which request was answered; its record (same seq) holds the
                        headers (no header value is echoed: stdout must never show a secret)
"""
import base64
import json
import socket
import ssl
import sys
import threading

log_lock = threading.Lock()
log_path = sys.argv[1]
sequence = [0]
rejected = []  # the Authorization value the first .../reject-first/ request carried


def append(record):
    with log_lock:
        with open(log_path, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()


def next_seq():
    with log_lock:
        sequence[0] += 1
        return sequence[0]


def rejects(path, headers):
    if "/reject-first/" not in path:
        return False
    authorization = next((value for key, value in headers if key.lower() == "authorization"), None)
    with log_lock:
        if not rejected:
            rejected.append(authorization)
        return authorization == rejected[0]


def respond(sock, status, body, content_type="application/json", close=False, extra=""):
    head = "HTTP/1.1 %d OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n" % (status, content_type, len(body))
    head += extra
    head += "Connection: close\r\n" if close else ""
    sock.sendall(head.encode() + b"\r\n" + body)


def serve(sock, name, conn, context):
    if context is not None:
        try:
            sock = context.wrap_socket(sock, server_side=True)
            append({"listener": name, "event": "tls", "conn": conn, "ok": True})
        except (ssl.SSLError, OSError):
            append({"listener": name, "event": "tls", "conn": conn, "ok": False})
            sock.close()
            return
    buffer = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return
            append({"listener": name, "event": "raw", "conn": conn, "bytes": base64.b64encode(chunk).decode()})
            buffer += chunk
            while b"\r\n\r\n" in buffer:
                head, rest = buffer.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                method, target = (parts + ["", ""])[:2]
                headers = []
                for line in lines[1:]:
                    key, _, value = line.partition(":")
                    headers.append([key.strip(), value.strip()])
                length = 0
                for key, value in headers:
                    if key.lower() == "content-length":
                        try:
                            length = int(value)
                        except ValueError:
                            length = 0
                if len(rest) < length:
                    break  # wait for the rest of the body
                body, buffer = rest[:length], rest[length:]
                seq = next_seq()
                append({"listener": name, "event": "request", "conn": conn, "seq": seq, "method": method,
                        "target": target, "headers": headers, "body": base64.b64encode(body).decode()})
                path = target.split("?", 1)[0]
                if rejects(path, headers):
                    respond(sock, 401, b"{}", extra='WWW-Authenticate: Bearer error="invalid_token"\r\n')
                elif method == "POST" and path.endswith("/token"):
                    token = {"access_token": "tok-%s-%d" % (name, seq), "token_type": "Bearer", "expires_in": 3600}
                    respond(sock, 200, json.dumps(token).encode())
                elif path.endswith("/events"):
                    respond(sock, 200, b"id: 1\ndata: hello\n\n", "text/event-stream", close=True)
                    return
                else:
                    answer = {"listener": name, "conn": conn, "seq": seq, "method": method, "target": target}
                    respond(sock, 200, json.dumps(answer).encode())
    except OSError:
        return
    finally:
        try:
            sock.close()
        except OSError:
            pass


def listen(name, server, context):
    conn = 0
    while True:
        client, _ = server.accept()
        conn += 1
        append({"listener": name, "event": "accept", "conn": conn})
        threading.Thread(target=serve, args=(client, name, conn, context), daemon=True).start()


def main():
    args = sys.argv[2:]
    cert = key = None
    if "--cert" in args:
        cert = args[args.index("--cert") + 1]
        key = args[args.index("--key") + 1]
        args = args[:args.index("--cert")]
    bound = []
    for spec in args:
        name, _, kind = spec.partition(":")
        context = None
        if kind == "tls":
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(128)
        bound.append((name, server, context))
    print(" ".join("%s=%d" % (name, server.getsockname()[1]) for name, server, _ in bound), flush=True)
    for name, server, context in bound:
        threading.Thread(target=listen, args=(name, server, context), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()

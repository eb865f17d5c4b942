#!/usr/bin/python3
"""A mutual-TLS authorization server and resource server (RFC 8705), standard library only.

Usage: mtls_server.py DIR CLIENT_ID SUBJECT_CN
DIR holds server.pem / server.key (the server's certificate for 127.0.0.1) and ca.pem (the CA
whose client certificates are trusted); the ledger is written to DIR/ledger.jsonl (one JSON object
a line; tokens and certificates appear as SHA-256 thumbprints only). Prints its port on the first
stdout line, then serves HTTPS until killed. The handshake asks for a client certificate but does
not require one (discovery has none); the endpoints that need one check it:

GET  /.well-known/oauth-authorization-server  issuer https://127.0.0.1:PORT; token_endpoint
     /plain-token (refuses every request: only the mTLS alias may be used), mtls_endpoint_aliases
     {token_endpoint: /token}, token_endpoint_auth_methods_supported [tls_client_auth]
POST /token  tls_client_auth (RFC 8705 §2.1): client_id CLIENT_ID and a certificate chaining to
     ca.pem whose subject CN is SUBJECT_CN; grant_type client_credentials. The access token is a
     JWT (HS256 with a key of the server's) whose cnf carries the certificate's x5t#S256 (§3.1).
GET|POST /resource/...  a live token presented with the certificate it is bound to: 200
     {"client", "x5t"}; otherwise 401 WWW-Authenticate: Bearer error="invalid_token".
"""
import base64
import hashlib
import hmac
import json
import os
import secrets
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

DIRECTORY, CLIENT_ID, SUBJECT_CN = sys.argv[1], sys.argv[2], sys.argv[3]
SIGNING_KEY = secrets.token_bytes(32)
lock = threading.Lock()
tokens = {}  # access token -> {"client", "x5t", "exp"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def ledger(entry):
    with lock, open(os.path.join(DIRECTORY, "ledger.jsonl"), "a") as out:
        out.write(json.dumps(entry) + "\n")


def thumbprint(der: bytes) -> str:
    return b64url(hashlib.sha256(der).digest())


def mint(claims) -> str:
    signing_input = b64url(json.dumps({"alg": "HS256", "typ": "at+jwt"}).encode()) + "." + b64url(
        json.dumps(claims).encode())
    signature = hmac.new(SIGNING_KEY, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64url(signature)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def peer(self):
        """The client certificate (DER) and its subject CN, or (None, None)."""
        der = self.connection.getpeercert(binary_form=True)
        if not der:
            return None, None
        subject = dict(item[0] for item in self.connection.getpeercert().get("subject", ()))
        return der, subject.get("commonName")

    def origin(self):
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    def do_GET(self):
        if self.path == "/.well-known/oauth-authorization-server":
            origin = self.origin()
            self.answer(200, {
                "issuer": origin, "token_endpoint": origin + "/plain-token",
                "mtls_endpoint_aliases": {"token_endpoint": origin + "/token"},
                "token_endpoint_auth_methods_supported": ["tls_client_auth"],
                "tls_client_certificate_bound_access_tokens": True,
            })
        elif self.path.startswith("/resource/"):
            self.resource()
        else:
            self.answer(404, {"error": "not_found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
        if self.path == "/token":
            self.token(form)
        elif self.path.startswith("/resource/"):
            self.resource()
        else:
            ledger({"event": "refused", "path": self.path, "why": "not the mTLS endpoint"})
            self.answer(400, {"error": "invalid_client", "error_description": "use the mtls_endpoint_aliases"})

    def token(self, form):
        der, cn = self.peer()
        client = (form.get("client_id") or [None])[0]
        if form.get("client_secret") or form.get("client_assertion") or self.headers.get("Authorization"):
            ledger({"event": "refused", "why": "another client authentication was sent"})
            return self.answer(400, {"error": "invalid_request", "error_description": "one authentication only"})
        if der is None or client != CLIENT_ID or cn != SUBJECT_CN:
            ledger({"event": "refused", "why": "no or wrong certificate", "client": client, "cn": cn})
            return self.answer(401, {"error": "invalid_client"})
        if (form.get("grant_type") or [None])[0] != "client_credentials":
            return self.answer(400, {"error": "unsupported_grant_type"})
        x5t = thumbprint(der)
        now = int(time.time())
        access = mint({"iss": self.origin(), "sub": client, "iat": now, "exp": now + 3600,
                       "jti": secrets.token_urlsafe(8), "cnf": {"x5t#S256": x5t}})
        with lock:
            tokens[access] = {"client": client, "x5t": x5t, "exp": now + 3600}
        ledger({"event": "issued", "client": client, "x5t": x5t,
                "token": b64url(hashlib.sha256(access.encode()).digest())})
        self.answer(200, {"access_token": access, "token_type": "Bearer", "expires_in": 3600})

    def resource(self):
        scheme, _, value = (self.headers.get("Authorization") or "").partition(" ")
        der, _ = self.peer()
        with lock:
            info = tokens.get(value.strip())
        presented = thumbprint(der) if der else None
        if scheme != "Bearer" or not info or presented != info["x5t"]:
            ledger({"event": "resource_refused", "x5t": presented, "bound": info and info["x5t"]})
            return self.answer(401, {"error": "invalid_token"},
                               [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        ledger({"event": "resource", "x5t": presented, "path": self.path})
        self.answer(200, {"client": info["client"], "x5t": presented})


def main():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(DIRECTORY, "server.pem"), os.path.join(DIRECTORY, "server.key"))
    context.load_verify_locations(os.path.join(DIRECTORY, "ca.pem"))
    context.verify_mode = ssl.CERT_OPTIONAL
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""A scripted OpenID Connect authorization server on loopback, for login tests that need what a
real server will not do: hostile text (control characters in a `sub`, a user code, an endpoint),
RFC 9207 `iss` in the redirect (right, wrong, missing), an ID token for another person on refresh.
Standard library plus `cryptography` (Debian's python3-cryptography) for RS256.

Usage: scripted_idp.py SCRIPT LOG
Prints "PORT" once listening. SCRIPT is a JSON file read again on every request (the test rewrites
it between steps); in its strings "{origin}" stands for http://127.0.0.1:PORT. Members (all
optional):
  metadata        members merged into the discovery document (null removes one)
  redirect        extra query members of the authorization redirect, e.g. {"iss": "{origin}"};
                  a member whose value is null is left out
  omit_code       true: the redirect carries no code
  device          the device authorization response (default: a valid one, user_code ABCD-EFGH)
  claims          claims merged into the ID token of a code or device grant
  refresh_claims  claims merged into the ID token of a refresh grant (the "sub" of the login
                  unless given); "refresh_id_token": false sends none
  jwks_status     a status /jwks answers with instead of the keys (an outage)
Routes: /.well-known/openid-configuration (and oauth-authorization-server): the metadata, issuer
{origin}; GET /authorize: 302 to redirect_uri with code, state and the scripted members; POST
/device; POST /token (authorization_code, device_code, refresh_token; every access token is
at-N, every refresh token rt-N, N counting token responses); GET /jwks; POST /revoke. Every request is appended to LOG as a
JSON line {method, path, form} (the form of POSTs) before it is answered.
"""
import base64
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

SCRIPT, LOG = sys.argv[1], sys.argv[2]
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
LOCK = threading.Lock()
STATE = {"code": 0, "token": 0, "nonces": {}}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uint(value):
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def jwks():
    numbers = KEY.public_key().public_numbers()
    return {"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
                      "n": b64url(uint(numbers.n)), "e": b64url(uint(numbers.e))}]}


def sign(claims):
    header = b64url(json.dumps({"alg": "RS256", "kid": "k1", "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signature = KEY.sign(f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{payload}.{b64url(signature)}"


def substitute(value, origin):
    if isinstance(value, str):
        return value.replace("{origin}", origin)
    if isinstance(value, list):
        return [substitute(item, origin) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, origin) for key, item in value.items()}
    return value


def next_number(kind):
    with LOCK:
        STATE[kind] += 1
        return STATE[kind]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def script(self):
        with open(SCRIPT) as f:
            return substitute(json.load(f), self.origin())

    def origin(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def record(self, form=None):
        with LOCK:
            with open(LOG, "a") as f:
                f.write(json.dumps({"method": self.command, "path": self.path, "form": form}) + "\n")

    def answer(self, status, body=None, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.record()
        parts = urllib.parse.urlsplit(self.path)
        script = self.script()
        origin = self.origin()
        if parts.path.startswith("/.well-known/"):
            metadata = {
                "issuer": origin, "authorization_endpoint": origin + "/authorize",
                "token_endpoint": origin + "/token", "device_authorization_endpoint": origin + "/device",
                "jwks_uri": origin + "/jwks", "revocation_endpoint": origin + "/revoke",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            }
            for key, value in script.get("metadata", {}).items():
                if value is None:
                    metadata.pop(key, None)
                else:
                    metadata[key] = value
            self.answer(200, metadata)
        elif parts.path == "/jwks":
            if script.get("jwks_status"):
                self.answer(script["jwks_status"], {"error": "unavailable"})
            else:
                self.answer(200, jwks())
        elif parts.path == "/authorize":
            query = dict(urllib.parse.parse_qsl(parts.query))
            code = f"code-{next_number('code')}"
            with LOCK:
                STATE["nonces"][code] = query.get("nonce")
            members = [] if script.get("omit_code") else [("code", code)]
            members.append(("state", query.get("state", "")))
            for key, value in script.get("redirect", {}).items():
                if value is not None:
                    members.append((key, value))
            target = query["redirect_uri"] + "?" + urllib.parse.urlencode(members)
            self.answer(302, None, [("Location", target)])
        else:
            self.answer(404, {"error": "not_found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        self.record(form)
        script = self.script()
        origin = self.origin()
        path = urllib.parse.urlsplit(self.path).path
        if path == "/device":
            self.answer(200, script.get("device") or {
                "device_code": "dc-secret-1", "user_code": "ABCD-EFGH", "verification_uri": origin + "/activate",
                "expires_in": 600, "interval": 1})
        elif path == "/revoke":
            self.answer(200, {})
        elif path == "/token":
            grant = form.get("grant_type", "")
            number = next_number("token")
            body = {"access_token": f"at-{number}", "token_type": "Bearer", "expires_in": 3600,
                    "refresh_token": f"rt-{number}"}
            now = int(time.time())
            claims = {"iss": origin, "aud": form.get("client_id", ""), "sub": "alice", "iat": now,
                      "exp": now + 600}
            if grant == "authorization_code":
                with LOCK:
                    nonce = STATE["nonces"].get(form.get("code"))
                if nonce:
                    claims["nonce"] = nonce
                claims.update(script.get("claims", {}))
                body["id_token"] = sign(claims)
            elif grant.endswith("device_code"):
                claims.update(script.get("claims", {}))
                body["id_token"] = sign(claims)
            elif grant == "refresh_token":
                claims["sub"] = script.get("claims", {}).get("sub", "alice")
                claims.update(script.get("refresh_claims", {}))
                if script.get("refresh_id_token", True):
                    body["id_token"] = sign(claims)
            else:
                self.answer(400, {"error": "unsupported_grant_type"})
                return
            self.answer(200, body, [("Cache-Control", "no-store")])
        else:
            self.answer(404, {"error": "not_found"})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

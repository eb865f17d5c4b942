"""A small MCP server that demands DPoP-bound tokens (RFC 9449), for the mcp-proxy tests.

One loopback origin plays both parts: `POST /token` issues client_credentials tokens bound to
the key of the request's DPoP proof (`token_type` DPoP), and `POST /mcp` is a Streamable HTTP
MCP endpoint (JSON answers) that takes only `Authorization: DPoP <token>` with a proof of the
token's key whose `htm`, `htu` and `ath` fit the request. The first request to `/mcp` with a
good proof is refused once with `WWW-Authenticate: DPoP error="use_dpop_nonce"` and a
`DPoP-Nonce`; every later proof must carry that nonce. Every proof and every refusal is recorded.

The tool `hold` answers on an event stream that is held open until the host cancels the call
(`notifications/cancelled` for its id): then the stream closes without an answer, as MCP says a
receiver of a cancellation does.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import jwt
from loopback_server import ServerThread, free_port
from jwt.algorithms import ECAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638 thumbprint of a P-256 public key."""
    members = {k: jwk[k] for k in ("crv", "kty", "x", "y")}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode()).digest())


@dataclass
class Proof:
    path: str
    claims: dict[str, Any]


@dataclass
class DPoPMCPServer:
    """Runs the server on a loopback port in a thread of this process."""

    proofs: list[Proof] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # each refusal's error
    tokens: dict[str, str] = field(default_factory=dict)  # access token -> jkt
    messages: list[dict[str, Any]] = field(
        default_factory=list
    )  # JSON-RPC bodies to /mcp
    nonce: str | None = None
    seen_jti: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.url = self.origin + "/mcp"
        self.token_url = self.origin + "/token"
        self.held: dict[str, asyncio.Event] = {}
        self.held_started = threading.Event()
        app = Starlette(
            routes=[
                Route("/token", self.token, methods=["POST"]),
                Route("/mcp", self.mcp, methods=["POST", "GET", "DELETE"]),
            ]
        )
        self.serving = ServerThread(app, self.port, lifespan="off")

    def start(self) -> "DPoPMCPServer":
        self.serving.start("the DPoP MCP server")
        return self

    def stop(self) -> None:
        self.serving.stop()

    def verify(
        self, request: Request, htu: str, access_token: str | None
    ) -> tuple[str | None, str]:
        """RFC 9449 §4.3: (the proof key's thumbprint, "") or (None, the problem)."""
        proofs = request.headers.getlist("dpop")
        if len(proofs) != 1:
            return None, "exactly one DPoP proof needed"
        proof = proofs[0]
        try:
            header = jwt.get_unverified_header(proof)
            jwk = header["jwk"]
            if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256":
                return None, "typ or alg"
            if "d" in jwk or jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
                return None, "jwk is not a public P-256 key"
            key = ECAlgorithm.from_jwk(json.dumps(jwk))
            claims = jwt.decode(proof, key=key, algorithms=["ES256"])  # type: ignore[arg-type]
        except Exception as error:  # noqa: BLE001 - any bad proof is refused
            return None, f"bad proof: {type(error).__name__}"
        if claims.get("htm") != request.method or claims.get("htu") != htu:
            return None, "htm or htu"
        if abs(claims.get("iat", 0) - time.time()) > 60:
            return None, "iat"
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti or jti in self.seen_jti:
            return None, "jti missing or reused"
        self.seen_jti.add(jti)
        if access_token is None:
            if "ath" in claims:
                return None, "ath on a token request"
        elif claims.get("ath") != b64url(
            hashlib.sha256(access_token.encode()).digest()
        ):
            return None, "ath is not the token's hash"
        self.proofs.append(Proof(request.url.path, claims))
        return thumbprint(jwk), ""

    async def token(self, request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode()))
        if (
            form.get("grant_type") != "client_credentials"
            or form.get("client_id") != "mcp-dpop"
        ):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        jkt, problem = self.verify(request, self.token_url, None)
        if jkt is None:
            self.refusals.append("invalid_dpop_proof: " + problem)
            return JSONResponse({"error": "invalid_dpop_proof"}, status_code=400)
        access = "dpop-at-" + secrets.token_urlsafe(24)
        self.tokens[access] = jkt
        return JSONResponse(
            {"access_token": access, "token_type": "DPoP", "expires_in": 3600}
        )

    def challenge(self, error: str, nonce: str | None = None) -> Response:
        self.refusals.append(error)
        headers = {"WWW-Authenticate": f'DPoP error="{error}", algs="ES256"'}
        if nonce:
            headers["DPoP-Nonce"] = nonce
        return Response(status_code=401, headers=headers)

    async def mcp(self, request: Request) -> Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme != "DPoP" or token not in self.tokens:
            return self.challenge("invalid_token")
        jkt, problem = self.verify(request, self.url, token)
        if jkt is None:
            return self.challenge("invalid_dpop_proof")
        if jkt != self.tokens[token]:
            return self.challenge("invalid_token")
        if self.nonce is None:
            self.nonce = secrets.token_urlsafe(12)
            return self.challenge("use_dpop_nonce", self.nonce)
        if self.proofs[-1].claims.get("nonce") != self.nonce:
            return self.challenge("use_dpop_nonce", self.nonce)
        if request.method != "POST":
            return Response(status_code=405)
        message = json.loads(await request.body())
        self.messages.append(message)
        return await self.answer(message)

    async def answer(self, message: dict[str, Any]) -> Response:
        method, id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if id is None:
            if method == "notifications/cancelled":
                held = self.held.get(json.dumps(params.get("requestId")))
                if held is not None:
                    held.set()
            return Response(status_code=202)
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "dpop-test", "version": "1"},
            }
        elif method == "tools/call" and params.get("name") == "hold":
            return self.hold(id)
        elif method == "tools/call":
            text = (params.get("arguments") or {}).get("text", "")
            result = {"content": [{"type": "text", "text": f"echo: {text}"}]}
        else:
            return JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {"code": -32601, "message": "no such method"},
                }
            )
        return JSONResponse({"jsonrpc": "2.0", "id": id, "result": result})

    def hold(self, id: Any) -> Response:
        """An event stream held open until the call is cancelled; then closed, unanswered."""
        released = asyncio.Event()
        self.held[json.dumps(id)] = released

        async def stream():
            yield b": held\n\n"
            self.held_started.set()
            await released.wait()

        return StreamingResponse(stream(), media_type="text/event-stream")

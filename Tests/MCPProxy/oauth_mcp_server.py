"""An OAuth-protected MCP server for the mcp-proxy tests, built from the official MCP Python SDK.

The SDK provides the MCP server, the protected-resource metadata routes, the authorization
server's routes (register, authorize, token, revoke) and the bearer middleware answering 401
with `resource_metadata`. The test supplies the in-memory provider below, which records what the
server was asked and plays the person at the authorize step by approving at once.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import parse_qs

from loopback_server import ServerThread, free_port
from pydantic import Field
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import (
    AuthSettings,
    ClientRegistrationOptions,
    RevocationOptions,
)
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


@dataclass
class Options:
    """What a test changes about the server."""

    token_lifetime: int = 3600
    prm_resource: str | None = None  # served instead of the real resource
    metadata_issuer: str | None = None  # served instead of the real issuer
    step_up_tool: str = "admin"  # needs the scope `extra`
    callback_iss: str | None = (
        None  # an RFC 9207 `iss` added to the authorization response
    )
    break_after_answer: bool = (
        False  # a tools/call's event stream breaks right after its answer
    )


class Provider:
    """An in-memory authorization server; every grant is recorded."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}
        self.spent_refresh: list[str] = []
        self.refresh_replays: list[str] = []
        self.authorizations: list[AuthorizationParams] = []
        self.lock = threading.Lock()

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        self.authorizations.append(params)
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(
            str(params.redirect_uri),
            code=code,
            state=params.state,
            iss=self.options.callback_iss,
        )

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(
        self, client_id: str, scopes: list[str], resource: str | None
    ) -> OAuthToken:
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        lifetime = self.options.token_lifetime
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + lifetime,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=lifetime,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(
            client.client_id or "",
            authorization_code.scopes,
            authorization_code.resource,
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        with self.lock:
            if refresh_token in self.spent_refresh:
                self.refresh_replays.append(refresh_token)
            return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self,
        client: OAuthClientInformationFull,
        refresh_token: RefreshToken,
        scopes: list[str],
    ) -> OAuthToken:
        with self.lock:
            if self.refresh.pop(refresh_token.token, None) is None:
                raise TokenError("invalid_grant", "refresh token already used")
            self.spent_refresh.append(refresh_token.token)
        return self._issue(
            client.client_id or "",
            scopes or refresh_token.scopes,
            refresh_token.resource,
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (
            found.expires_at is not None and found.expires_at < time.time()
        ):
            return None
        return found

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(getattr(token, "token", ""), None)
        self.refresh.pop(getattr(token, "token", ""), None)


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    form: dict[str, list[str]]
    body: bytes
    headers: dict[str, str]


@dataclass
class OAuthMCPServer:
    """Runs the server on a loopback port in a thread of this process."""

    options: Options = field(default_factory=Options)
    records: list[Recorded] = field(default_factory=list)
    calls_in_flight: int = 0
    most_calls_in_flight: int = 0

    def __post_init__(self) -> None:
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.url = self.origin + "/mcp"
        self.provider = Provider(self.options)
        server = MCPServer(
            "proxy-test",
            auth_server_provider=self.provider,
            auth=AuthSettings(
                issuer_url=self.origin,
                resource_server_url=self.url,
                required_scopes=["mcp"],
                client_registration_options=ClientRegistrationOptions(
                    enabled=True,
                    valid_scopes=["mcp", "extra", "offline_access"],
                    default_scopes=["mcp"],
                ),
                revocation_options=RevocationOptions(enabled=True),
                validate_token_resource=True,
            ),
        )

        @server.tool()
        def echo(text: str) -> str:
            """Echoes the text."""
            return f"echo: {text}"

        @server.tool()
        def regional(
            region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
            limit: Annotated[
                int, Field(json_schema_extra={"x-mcp-header": "Limit"})
            ] = 10,
        ) -> str:
            """Its region and limit travel in Mcp-Param-* headers too (MCP 2026-07-28)."""
            return f"{region}: {limit}"

        @server.tool()
        def reports() -> str:
            """Needs the scope `extra`; the server says so in a 401's `scope`."""
            return "reports ok"

        @server.tool()
        def big(size: int) -> str:
            """An answer of `size` bytes: one event stream `data:` line of about that size."""
            return "x" * size

        @server.tool()
        def admin() -> str:
            """Needs the scope `extra`."""
            return "admin ok"

        self.inner = server.streamable_http_app()
        self.serving = ServerThread(self.app, self.port, lifespan="on")

    def start(self) -> "OAuthMCPServer":
        self.serving.start("the MCP server")
        return self

    def stop(self) -> None:
        self.serving.stop()

    def requests_to(self, path: str, method: str | None = None) -> list[Recorded]:
        return [
            r
            for r in self.records
            if r.path == path and (method is None or r.method == method)
        ]

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Records every request, then serves it (with the test's changes to the metadata)."""
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1")
            for k, v in scope["headers"]
        }
        form = (
            parse_qs(body.decode("utf-8", "replace"))
            if "form-urlencoded" in headers.get("content-type", "")
            else {}
        )
        self.records.append(
            Recorded(
                scope["method"],
                scope["path"],
                parse_qs(scope["query_string"].decode()),
                form,
                body,
                headers,
            )
        )
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        path = scope["path"]
        is_call = scope["method"] == "POST" and path == "/mcp"
        if is_call:
            self.calls_in_flight += 1
            self.most_calls_in_flight = max(
                self.most_calls_in_flight, self.calls_in_flight
            )
            try:
                await self._serve(scope, send, path, is_call, body, headers, replay)
            finally:
                self.calls_in_flight -= 1
            return
        await self._serve(scope, send, path, is_call, body, headers, replay)

    async def _serve(
        self,
        scope: dict[str, Any],
        send: Any,
        path: str,
        is_call: bool,
        body: bytes,
        headers: dict[str, str],
        replay: Any,
    ) -> None:
        if is_call and self._needs_step_up(body, headers, "reports"):
            metadata = f"{self.origin}/.well-known/oauth-protected-resource/mcp"
            challenge = f'Bearer error="invalid_token", scope="mcp extra", resource_metadata="{metadata}"'
            await self._answer(
                send, 401, b"", [(b"www-authenticate", challenge.encode())]
            )
            return
        if is_call and self._needs_step_up(body, headers):
            await self._answer(
                send,
                403,
                b"",
                [
                    (
                        b"www-authenticate",
                        b'Bearer error="insufficient_scope", scope="mcp extra"',
                    )
                ],
            )
            return
        if is_call and self.options.break_after_answer:
            await self._break_after_answer(scope, replay, send)
            return
        rewrite = None
        if (
            path.startswith("/.well-known/oauth-protected-resource")
            and self.options.prm_resource
        ):
            rewrite = ("resource", self.options.prm_resource)
        if (
            path.startswith("/.well-known/oauth-authorization-server")
            and self.options.metadata_issuer
        ):
            rewrite = ("issuer", self.options.metadata_issuer)
        if rewrite is None:
            await self.inner(scope, replay, send)
            return
        captured: dict[str, Any] = {"body": b""}

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                captured["start"] = message
            else:
                captured["body"] += message.get("body", b"")

        await self.inner(scope, replay, capture)
        document = json.loads(captured["body"])
        document[rewrite[0]] = rewrite[1]
        await self._answer(
            send,
            captured["start"]["status"],
            json.dumps(document).encode(),
            [(b"content-type", b"application/json")],
        )

    def _needs_step_up(
        self, body: bytes, headers: dict[str, str], tool: str | None = None
    ) -> bool:
        try:
            message = json.loads(body)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        if (message.get("params") or {}).get("name") != (
            tool or self.options.step_up_tool
        ):
            return False
        token = headers.get("authorization", "").removeprefix("Bearer ")
        found = self.provider.access.get(token)
        return found is not None and "extra" not in found.scopes

    async def _break_after_answer(self, scope: Any, receive: Any, send: Any) -> None:
        """Serves the call, then breaks the chunked transfer right after the body part that
        carried the answer (the connection is dropped mid-stream)."""

        class Broken(Exception):
            pass

        broken = False

        async def breaking(message: dict[str, Any]) -> None:
            nonlocal broken
            if broken:
                raise Broken()
            await send(message)
            if message["type"] == "http.response.body" and b'"result"' in message.get(
                "body", b""
            ):
                broken = True
                raise Broken()

        try:
            await self.inner(scope, receive, breaking)
        except Broken:
            pass
        if broken:
            raise RuntimeError("the stream breaks after the answer, on purpose")

    @staticmethod
    async def _answer(
        send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": headers + [(b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


_ = (asyncio, get_access_token)

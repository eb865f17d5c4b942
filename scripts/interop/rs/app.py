"""Resource server for tokenrelay's interop tests (test-only).

Validates bearer tokens by RFC 7662 introspection against the Django OAuth Toolkit AS and serves
Server-Sent Events resumable from Last-Event-ID. Run by scripts/interop/stack under uvicorn.

Env:
  RS_INTROSPECT_URL   http://127.0.0.1:PORT/o/introspect/ (set by the stack)
  RS_CLIENT_ID / RS_CLIENT_SECRET   rs / rs-secret (a confidential client on the AS)
  RS_CACHE_SECONDS    positive-introspection cache, capped by the token's exp (concurrent requests
                      with one uncached token share one introspection); 0 (default) = every request
  RS_REQUIRED_SCOPE   scope every authenticated endpoint needs; default "read"
  RS_AS_URL           the AS origin, for the mix-up metadata below (default: from RS_INTROSPECT_URL)

Endpoints (auth = Bearer token, introspected):
  GET  /whoami                 auth; {client_id, username, scope, exp}
  ANY  /echo                   auth; echoes method, path, query, headers (minus Authorization), body
  GET  /events                 auth; SSE (parameters below), ends when the token expires
  GET  /events/nocontent       auth; 204
  GET  /events/forbidden       auth; 403
  GET  /public/events          no auth; SSE, same parameters, never expires
  ANY  /public/echo            no auth; like /echo
  GET  /status/{code}          no auth; answers that status (?retry_after=S adds Retry-After)
  GET  /slow?delay=S           no auth; answers after S seconds
  GET  /counters[?tag=T]       receipts per X-Request-Tag header (every path counts); DELETE resets
  GET  /healthz                {ok, introspections, ...stats}
  GET  /.well-known/oauth-authorization-server/mixup   the AS's RFC 8414 metadata, verbatim
  GET  /mixup/.well-known/openid-configuration         the AS's OIDC metadata, verbatim
       (issuer mix-up: a client configured with issuer RS_URL/mixup gets metadata whose issuer is the
       real AS's, with the real token endpoint; it must refuse and send nothing to that endpoint)

SSE parameters: Last-Event-ID header or ?last_event_id= (resume after that integer id; default 0),
?count=N events (default 5; -1 = unlimited), ?interval=S between events (default 0.2),
?retry=MS (default 500), ?ping=S keep-alive comment period (default 15; 0 = none),
?drop_after=N abort the connection after N events (no final event, no terminating chunk),
?stall_after=N go silent (no bytes at all) after N events until the client leaves,
?size=N pad each event's data to about N bytes, ?eol=lf|crlf|cr line endings (default lf),
?expired_event=0 end at token expiry without the final token-expired event.
Events: "id: <n>", "event: tick", "data: {"seq": <n>}". The first block is ": resumed-from <last>"
plus "retry: <ms>". When the token's exp passes, a final "event: token-expired" is sent and the
stream ends, so a client must reconnect with a fresh token and Last-Event-ID.
"""
import asyncio
import contextlib
import hashlib
import json
import logging
import os
import time

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

INTROSPECT_URL = os.environ.get("RS_INTROSPECT_URL", "http://127.0.0.1:9000/o/introspect/")
CLIENT = (os.environ.get("RS_CLIENT_ID", "rs"), os.environ.get("RS_CLIENT_SECRET", "rs-secret"))
CACHE_SECONDS = float(os.environ.get("RS_CACHE_SECONDS", "0"))
REQUIRED_SCOPE = os.environ.get("RS_REQUIRED_SCOPE", "read")
AS_URL = os.environ.get("RS_AS_URL") or INTROSPECT_URL.split("/o/introspect/")[0]
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

_http: httpx.AsyncClient | None = None
_cache: dict[str, tuple[float, dict]] = {}
_inflight: dict[str, asyncio.Future] = {}
stats = {"introspections": 0, "introspection_errors": 0, "requests": 0,
         "streams_open": 0, "streams_total": 0, "events_sent": 0}
counters: dict[str, dict] = {}


class DropConnection(Exception):
    """Raised inside an SSE body to abort the connection (uvicorn closes it without a final chunk)."""


class _QuietDrops(logging.Filter):
    """Keeps deliberate drops (?drop_after) out of uvicorn's error log."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return not isinstance(exc, DropConnection)


logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


# ---------------------------------------------------------------- authentication

async def introspect(token: str) -> dict:
    key = hashlib.sha256(token.encode()).hexdigest()
    now = time.time()
    hit = _cache.get(key)
    if hit and hit[0] > now:
        return hit[1]
    if CACHE_SECONDS <= 0:
        return await _introspect_at_as(token, key, now)
    # With the cache on, concurrent requests with one new token share one introspection, as a
    # caching RS does: without it a storm of 200 requests with a fresh token is 200 introspections
    # queued on 50 connections, and under load some wait past the pool timeout (a 503 that says
    # nothing about the client under test).
    pending = _inflight.get(key)
    if pending is None:
        pending = asyncio.ensure_future(_introspect_at_as(token, key, now))
        _inflight[key] = pending
        pending.add_done_callback(lambda _: _inflight.pop(key, None))
    return await asyncio.shield(pending)


async def _introspect_at_as(token: str, key: str, now: float) -> dict:
    stats["introspections"] += 1
    try:
        r = await _http.post(INTROSPECT_URL, data={"token": token, "token_type_hint": "access_token"}, auth=CLIENT)
    except httpx.TransportError:
        # a pooled connection may be stale after `stack restart-as`: one retry on a fresh one
        r = await _http.post(INTROSPECT_URL, data={"token": token, "token_type_hint": "access_token"}, auth=CLIENT)
    r.raise_for_status()
    info = r.json()
    if CACHE_SECONDS > 0 and info.get("active"):
        _cache[key] = (min(now + CACHE_SECONDS, float(info.get("exp", now))), info)
    return info


def challenge(status: int, error: str | None = None, desc: str | None = None) -> JSONResponse:
    # RFC 6750 s3: no error attribute when the request carried no credentials at all.
    parts = ['Bearer realm="rs"']
    if error:
        parts.append(f'error="{error}"')
        if desc:
            parts.append(f'error_description="{desc}"')
        if error == "insufficient_scope":
            parts.append(f'scope="{REQUIRED_SCOPE}"')
    return JSONResponse({"error": error or "unauthorized"}, status_code=status,
                        headers={"WWW-Authenticate": ", ".join(parts)})


async def authenticate(request: Request):
    """Returns (token_info, None) or (None, error_response)."""
    auth = request.headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if not auth:
        return None, challenge(401)
    if scheme.lower() != "bearer" or not token.strip():
        return None, challenge(400, "invalid_request", "Bearer token required")
    try:
        info = await introspect(token.strip())
    except (httpx.HTTPError, ValueError):
        stats["introspection_errors"] += 1
        return None, JSONResponse({"error": "introspection_unavailable"}, status_code=503)
    if not info.get("active"):
        return None, challenge(401, "invalid_token", "The access token is invalid or expired")
    if REQUIRED_SCOPE and REQUIRED_SCOPE not in info.get("scope", "").split():
        return None, challenge(403, "insufficient_scope")
    return info, None


# ---------------------------------------------------------------- plain endpoints

async def whoami(request: Request):
    info, err = await authenticate(request)
    if err:
        return err
    return JSONResponse({"client_id": info.get("client_id"), "username": info.get("username"),
                         "scope": info.get("scope"), "exp": info.get("exp")})


async def _echo_body(request: Request, info: dict | None) -> JSONResponse:
    body = await request.body()
    headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
    return JSONResponse({"method": request.method, "path": request.url.path, "query": request.url.query,
                         "headers": headers, "body": body.decode("utf-8", "replace"), "body_length": len(body),
                         "client_id": (info or {}).get("client_id")})


async def echo(request: Request):
    info, err = await authenticate(request)
    if err:
        return err
    return await _echo_body(request, info)


async def public_echo(request: Request):
    return await _echo_body(request, None)


async def status(request: Request):
    code = int(request.path_params["code"])
    headers = {}
    if "retry_after" in request.query_params:
        headers["Retry-After"] = request.query_params["retry_after"]
    if code in (204, 304) or code < 200:
        return Response(status_code=code, headers=headers)
    return JSONResponse({"status": code}, status_code=code, headers=headers)


async def slow(request: Request):
    await asyncio.sleep(float(request.query_params.get("delay", "1")))
    return JSONResponse({"ok": True})


async def nocontent(request: Request):
    _, err = await authenticate(request)
    return err or Response(status_code=204)


async def forbidden(request: Request):
    _, err = await authenticate(request)
    return err or JSONResponse({"error": "forbidden"}, status_code=403)


async def counters_view(request: Request):
    if request.method == "DELETE":
        counters.clear()
        return JSONResponse({"ok": True})
    tag = request.query_params.get("tag")
    if tag is not None:
        c = counters.get(tag, {"received": 0, "statuses": {}})
        return JSONResponse({"tag": tag, **c})
    return JSONResponse(counters)


async def mixup_metadata(request: Request):
    path = ("/.well-known/oauth-authorization-server/o" if request.url.path.startswith("/.well-known/")
            else "/o/.well-known/openid-configuration")
    try:
        r = await _http.get(AS_URL + path)
    except httpx.HTTPError:
        return JSONResponse({"error": "authorization server unreachable"}, status_code=503)
    return Response(r.content, status_code=r.status_code, media_type="application/json")


async def health(request: Request):
    return JSONResponse({"ok": True, **stats})


# ---------------------------------------------------------------- SSE

def _sse_params(request: Request):
    q = request.query_params
    last = request.headers.get("last-event-id") or q.get("last_event_id") or "0"
    start = int(last) + 1
    eol = {"lf": "\n", "crlf": "\r\n", "cr": "\r"}[q.get("eol", "lf")]
    return dict(last=last, start=start, eol=eol,
                count=int(q.get("count", "5")), interval=float(q.get("interval", "0.2")),
                retry=int(q.get("retry", "500")), ping=float(q.get("ping", "15")),
                drop_after=int(q["drop_after"]) if "drop_after" in q else None,
                stall_after=int(q["stall_after"]) if "stall_after" in q else None,
                size=int(q.get("size", "0")), expired_event=q.get("expired_event", "1") != "0")


def _block(eol: str, *lines: str) -> bytes:
    return (eol.join(lines) + eol + eol).encode()


async def _sse_body(p: dict, exp: float | None):
    eol = p["eol"]
    stats["streams_open"] += 1
    stats["streams_total"] += 1
    try:
        yield _block(eol, ": resumed-from " + p["last"], f"retry: {p['retry']}")
        i, sent = p["start"], 0
        while p["count"] < 0 or sent < p["count"]:
            if p["drop_after"] is not None and sent >= p["drop_after"]:
                raise DropConnection()
            if p["stall_after"] is not None and sent >= p["stall_after"]:
                while True:
                    await asyncio.sleep(3600)
            if exp and time.time() >= exp:
                if p["expired_event"]:
                    yield _block(eol, f"id: {i - 1}", "event: token-expired", "data: reconnect with a fresh token")
                return
            data = f'{{"seq": {i}}}'
            if p["size"] > len(data):
                data = f'{{"seq": {i}, "pad": "{"x" * max(0, p["size"] - len(data) - 11)}"}}'
            yield _block(eol, f"id: {i}", "event: tick", f"data: {data}")
            stats["events_sent"] += 1
            i, sent = i + 1, sent + 1
            if p["interval"] <= 0:
                await asyncio.sleep(0)  # a fast stream must still let other connections run
            # wait `interval`, but wake at the token's expiry and send keep-alive comments meanwhile
            deadline = time.time() + p["interval"]
            while True:
                now = time.time()
                until = deadline if not exp else min(deadline, exp)
                if now >= until:
                    break
                step = until - now if p["ping"] <= 0 else min(until - now, p["ping"])
                await asyncio.sleep(step)
                if p["ping"] > 0 and time.time() < until:
                    yield (": ping" + eol + eol).encode()
            if exp and time.time() >= exp and (p["count"] < 0 or sent < p["count"]):
                if p["expired_event"]:
                    yield _block(eol, f"id: {i - 1}", "event: token-expired", "data: reconnect with a fresh token")
                return
    finally:
        stats["streams_open"] -= 1


def _sse_response(p: dict, exp: float | None) -> StreamingResponse:
    return StreamingResponse(_sse_body(p, exp), media_type="text/event-stream; charset=utf-8",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def events(request: Request):
    info, err = await authenticate(request)
    if err:
        return err
    try:
        p = _sse_params(request)
    except (ValueError, KeyError):
        return JSONResponse({"error": "bad SSE parameters or Last-Event-ID"}, status_code=400)
    return _sse_response(p, float(info.get("exp", 0)) or None)


async def public_events(request: Request):
    try:
        p = _sse_params(request)
    except (ValueError, KeyError):
        return JSONResponse({"error": "bad SSE parameters or Last-Event-ID"}, status_code=400)
    return _sse_response(p, None)


# ---------------------------------------------------------------- receipt counters (pure ASGI)

class CountingMiddleware:
    """Counts every HTTP request on receipt, per X-Request-Tag header, with its final status."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        stats["requests"] += 1
        tag = None
        for k, v in scope.get("headers", []):
            if k == b"x-request-tag":
                tag = v.decode("latin-1")
                break
        if tag is None:
            return await self.app(scope, receive, send)
        entry = counters.setdefault(tag, {"received": 0, "statuses": {}})
        entry["received"] += 1

        async def counting_send(message):
            if message["type"] == "http.response.start":
                key = str(message["status"])
                entry["statuses"][key] = entry["statuses"].get(key, 0) + 1
            await send(message)

        return await self.app(scope, receive, counting_send)


@contextlib.asynccontextmanager
async def lifespan(app):
    global _http
    _http = httpx.AsyncClient(timeout=5.0, limits=httpx.Limits(max_connections=50, max_keepalive_connections=50))
    yield
    await _http.aclose()


_starlette = Starlette(
    routes=[
        Route("/whoami", whoami),
        Route("/echo", echo, methods=ALL_METHODS),
        Route("/events", events),
        Route("/events/nocontent", nocontent),
        Route("/events/forbidden", forbidden),
        Route("/public/events", public_events),
        Route("/public/echo", public_echo, methods=ALL_METHODS),
        Route("/status/{code:int}", status, methods=ALL_METHODS),
        Route("/slow", slow),
        Route("/counters", counters_view, methods=["GET", "DELETE"]),
        Route("/healthz", health),
        Route("/.well-known/oauth-authorization-server/mixup", mixup_metadata),
        Route("/mixup/.well-known/openid-configuration", mixup_metadata),
    ],
    lifespan=lifespan,
)
app = CountingMiddleware(_starlette)

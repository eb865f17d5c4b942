#!/usr/bin/env python3
"""A fake tokenrelay for client tests: speaks NDJSON JSON-RPC on stdio and returns canned
results and notifications, following schemas/openrpc.json. Ignores its arguments.

- ``request``: path ``/error/<kind>`` answers with that error kind; ``/slow`` is only
  answered when cancelled (-32800); ``/text`` and ``/bytes`` return those bodies; anything
  else returns 200 with ``json: {"params": <the params>}``.
- ``token-invalidate`` returns ``{invalidated: 1}`` (3 with ``all``); ``status`` a canned result.
- ``subscribe``: replies ``{subscription}`` then sends connecting, open, three events;
  ``/sse/finite`` then closes; otherwise stays open until ``unsubscribe``.
  ``/error/<kind>`` fails like ``request``.
- ``fake/received`` returns every message received so far; ``fake/die`` exits with 9
  without answering; ``fake/notify`` sends a notification ``{method, params}``.
"""

import json
import os
import sys

CODES = {
    "parse": -32700, "invalid_request": -32600, "method_not_found": -32601, "invalid_params": -32602,
    "internal": -32603, "cancelled": -32800, "config": -32004, "unknown_environment": -32005,
    "unknown_profile": -32003, "auth": -32010, "interaction_required": -32011, "transport": -32020,
    "timeout": -32021, "limit": -32022, "shutting_down": -32030, "not_supported": -32031,
}

out = sys.stdout
received = []
slow = {}
subscriptions = {}
shut_down = False
counter = 0


def send(message):
    out.write(json.dumps(message, separators=(",", ":")) + "\n")
    out.flush()


def result(id, value):
    send({"jsonrpc": "2.0", "id": id, "result": value})


def error(id, kind, message=None, **extra):
    data = {"kind": kind}
    data.update(extra)
    send({"jsonrpc": "2.0", "id": id, "error": {"code": CODES.get(kind, -32000), "message": message or f"fake {kind}", "data": data}})


def notify(method, params):
    send({"jsonrpc": "2.0", "method": method, "params": params})


def kind_error(id, kind):
    extra = {}
    if kind == "auth":
        extra = {"oauthError": "invalid_client", "oauthErrorDescription": "client authentication failed"}
    if kind == "invalid_params":
        extra = {"diagnostics": [{"pointer": "/method", "reason": "must be a string"}]}
    error(id, kind, **extra)


def handle(message):
    global shut_down, counter
    method = message.get("method")
    params = message.get("params") or {}
    has_id = "id" in message
    id = message.get("id")
    if method == "$/cancelRequest":
        target = params.get("id")
        if target in slow:
            del slow[target]
            error(target, "cancelled", "request cancelled")
        return
    if method == "exit":
        sys.exit(0 if shut_down else 1)
    if not has_id:
        return
    if shut_down:
        error(id, "shutting_down")
        return
    if method == "initialize":
        result(id, {"serverInfo": {"name": "tokenrelay", "version": "0.0.0-fake"}, "protocolVersion": "fake",
                    "environments": [{"name": "staging", "default": True, "profiles": [{"name": "svc", "type": "oauth2"}]}],
                    "capabilities": {}})
    elif method == "ping":
        result(id, {})
    elif method == "shutdown":
        shut_down = True
        result(id, None)
    elif method == "fake/received":
        result(id, received)
    elif method == "fake/die":
        os._exit(9)
    elif method == "fake/notify":
        result(id, {})
        notify(params["method"], params.get("params", {}))
    elif method == "request":
        path = params.get("path", "")
        if path.startswith("/error/"):
            kind_error(id, path[len("/error/"):])
        elif path == "/slow":
            slow[id] = True
        elif path == "/text":
            result(id, {"status": 200, "headers": {"content-type": "text/plain"}, "text": "héllo", "elapsedMs": 2})
        elif path == "/bytes":
            result(id, {"status": 200, "headers": {"content-type": "application/octet-stream"}, "base64": "AAEC/w==", "elapsedMs": 2})
        elif path == "/missing":
            result(id, {"status": 404, "headers": {}, "elapsedMs": 1})
        else:
            result(id, {"status": 200, "headers": {"content-type": "application/json", "set-cookie": ["a=1", "b=2"]},
                        "json": {"params": params, "big": 123456789012345678901234567890}, "elapsedMs": 1.5})
    elif method == "token-invalidate":
        result(id, {"invalidated": 3 if params.get("all") else 1})
    elif method == "status":
        result(id, {"sessions": [{"environment": "staging", "profile": "svc", "type": "oauth2", "state": "valid",
                                   "refreshable": True, "counters": {"acquisitions": 1, "renewals": 0}}],
                    "subscriptions": []})
    elif method == "subscribe":
        path = params.get("path", "")
        if path.startswith("/error/"):
            kind_error(id, path[len("/error/"):])
            return
        counter += 1
        sub = f"s{counter}"
        subscriptions[sub] = True
        result(id, {"subscription": sub})
        notify("subscription-state", {"subscription": sub, "state": "connecting", "attempt": 1})
        notify("subscription-state", {"subscription": sub, "state": "open", "status": 200})
        notify("event", {"subscription": sub, "id": "1", "event": "message", "data": "one"})
        notify("event", {"subscription": sub, "event": "tick", "data": "two\nlines", "retry": 1500})
        notify("event", {"subscription": sub, "id": "3", "event": "message", "data": json.dumps(params)})
        if path == "/sse/finite":
            del subscriptions[sub]
            notify("subscription-state", {"subscription": sub, "state": "closed", "status": 204})
    elif method == "unsubscribe":
        sub = params.get("subscription")
        if sub in subscriptions:
            del subscriptions[sub]
            result(id, {})
            notify("subscription-state", {"subscription": sub, "state": "closed"})
        else:
            error(id, "invalid_params", diagnostics=[{"pointer": "/subscription", "reason": "unknown subscription"}])
    else:
        error(id, "method_not_found", f"method not found: {method}")


def main():
    sys.stderr.write("tokenrelay info: fake server started\n")
    sys.stderr.write("tokenrelay warn: this is a fake\n")
    sys.stderr.flush()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        message = json.loads(line)
        for item in message if isinstance(message, list) else [message]:
            received.append(item)
            handle(item)


if __name__ == "__main__":
    main()

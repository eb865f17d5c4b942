"""The protocol core shared by :class:`Relay` and :class:`AsyncRelay`: locating the
binary, building messages and params, classifying incoming messages and mapping results.
Pure: no I/O besides reading ``PATH``."""

from __future__ import annotations

import base64
import json as _json
import logging
import math
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import ProtocolError, RelayError, error_from_json

__all__ = [
    "Response",
    "Event",
    "SubscriptionState",
    "find_binary",
    "build_argv",
    "request_params",
    "subscribe_params",
    "invalidate_params",
]

JSONValue = Any
Id = Union[int, str]

SERVER_LOGGER = logging.getLogger("tokenrelay.server")
_LEVELS = {
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,
}


def find_binary(binary: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> str:
    """The tokenrelay executable: ``binary`` if given, else ``$TOKENRELAY_BIN``, else
    ``tokenrelay`` on ``PATH``. Raises :class:`FileNotFoundError` when none exists."""
    env = os.environ if environ is None else environ
    candidate = binary or env.get("TOKENRELAY_BIN")
    if candidate:
        if os.sep in candidate or (os.altsep and os.altsep in candidate):
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
            raise FileNotFoundError(f"tokenrelay binary not found or not executable: {candidate}")
        found = shutil.which(candidate, path=env.get("PATH"))
        if found:
            return found
        raise FileNotFoundError(f"tokenrelay binary not found on PATH: {candidate}")
    found = shutil.which("tokenrelay", path=env.get("PATH"))
    if found:
        return found
    raise FileNotFoundError("tokenrelay binary not found: pass binary=, set $TOKENRELAY_BIN or put it on PATH")


def build_argv(
    binary: str,
    *,
    config: Optional[Union[str, "os.PathLike[str]"]] = None,
    env: Optional[str] = None,
    log_level: Optional[str] = None,
    args: Sequence[str] = (),
) -> List[str]:
    """The command line that starts a server speaking NDJSON."""
    argv = [binary, "serve", "--framing", "ndjson"]
    if config is not None:
        argv += ["--config", os.path.expanduser(os.fspath(config))]
    if env is not None:
        argv += ["--env", env]
    if log_level is not None:
        argv += ["--log-level", log_level]
    argv += list(args)
    return argv


def encode_message(message: Mapping[str, Any]) -> bytes:
    """One NDJSON frame (compact JSON, one line)."""
    return (_json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def request_message(id: Id, method: str, params: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    message: Dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def notification_message(method: str, params: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    message: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def cancel_message(id: Id) -> Dict[str, Any]:
    """``$/cancelRequest`` for a request id."""
    return notification_message("$/cancelRequest", {"id": id})


def timeout_ms(timeout: Optional[float]) -> Optional[int]:
    """Seconds to whole milliseconds (rounded up, at least 1)."""
    if timeout is None:
        return None
    if timeout <= 0 or math.isnan(timeout):
        raise ValueError("timeout must be positive")
    return max(1, math.ceil(timeout * 1000))


def _target(params: Dict[str, Any], path: Optional[str], url: Optional[str]) -> None:
    if path is not None and url is not None:
        raise ValueError("pass either path or url, not both")
    if path is None and url is None:
        raise ValueError("pass path or url")
    if path is not None:
        params["path"] = path
    if url is not None:
        params["url"] = url


def _common(
    params: Dict[str, Any],
    *,
    path_params: Optional[Mapping[str, Any]],
    query: Optional[Mapping[str, Any]],
    headers: Optional[Mapping[str, str]],
    environment: Optional[str],
    profile: Optional[str],
    timeout: Optional[float],
    auth: bool,
) -> None:
    if path_params is not None:
        params["pathParams"] = dict(path_params)
    if query is not None:
        params["query"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in query.items()}
    if headers is not None:
        params["headers"] = dict(headers)
    if environment is not None:
        params["environment"] = environment
    if profile is not None:
        params["profile"] = profile
    ms = timeout_ms(timeout)
    if ms is not None:
        params["timeoutMs"] = ms
    if not auth:
        params["auth"] = False


def request_params(
    method: str = "GET",
    path: Optional[str] = None,
    *,
    url: Optional[str] = None,
    path_params: Optional[Mapping[str, Any]] = None,
    query: Optional[Mapping[str, Any]] = None,
    headers: Optional[Mapping[str, str]] = None,
    json: Any = None,
    text: Optional[str] = None,
    content: Optional[bytes] = None,
    environment: Optional[str] = None,
    profile: Optional[str] = None,
    timeout: Optional[float] = None,
    auth: bool = True,
) -> Dict[str, Any]:
    """The ``request`` params. At most one of ``json``, ``text``, ``content`` (bytes,
    sent as ``base64``). ``json=None`` means no body."""
    bodies = [b for b in (json, text, content) if b is not None]
    if len(bodies) > 1:
        raise ValueError("pass at most one of json, text, content")
    params: Dict[str, Any] = {"method": method.upper()}
    _target(params, path, url)
    _common(params, path_params=path_params, query=query, headers=headers, environment=environment,
            profile=profile, timeout=timeout, auth=auth)
    if json is not None:
        params["json"] = json
    if text is not None:
        params["text"] = text
    if content is not None:
        params["base64"] = base64.b64encode(bytes(content)).decode("ascii")
    return params


def subscribe_params(
    path: Optional[str] = None,
    *,
    url: Optional[str] = None,
    path_params: Optional[Mapping[str, Any]] = None,
    query: Optional[Mapping[str, Any]] = None,
    headers: Optional[Mapping[str, str]] = None,
    environment: Optional[str] = None,
    profile: Optional[str] = None,
    timeout: Optional[float] = None,
    auth: bool = True,
    last_event_id: Optional[str] = None,
    until_closed: bool = False,
) -> Dict[str, Any]:
    """The ``subscribe`` params (GET, no body). ``until_closed``: a stream the server ends
    cleanly ends the subscription (``closed``) instead of reconnecting."""
    params: Dict[str, Any] = {}
    _target(params, path, url)
    _common(params, path_params=path_params, query=query, headers=headers, environment=environment,
            profile=profile, timeout=timeout, auth=auth)
    if last_event_id is not None:
        params["lastEventId"] = last_event_id
    if until_closed:
        params["untilClosed"] = True
    return params


def invalidate_params(environment: Optional[str] = None, profile: Optional[str] = None, all: bool = False) -> Dict[str, Any]:
    """The ``token-invalidate`` params."""
    params: Dict[str, Any] = {}
    if environment is not None:
        params["environment"] = environment
    if profile is not None:
        params["profile"] = profile
    if all:
        params["all"] = True
    return params


def invalidated_count(result: Any, member: str = "invalidated", method: str = "token-invalidate") -> int:
    """The ``invalidated`` count of a ``token-invalidate`` result (``loggedOut`` of ``logout``)."""
    if isinstance(result, dict) and isinstance(result.get(member), int):
        return int(result[member])
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    raise ProtocolError(f"unexpected {method} result: {result!r}")


def token_get_params(environment: Optional[str] = None, profile: Optional[str] = None) -> Dict[str, Any]:
    """The ``token-get`` params."""
    params: Dict[str, Any] = {}
    if environment is not None:
        params["environment"] = environment
    if profile is not None:
        params["profile"] = profile
    return params


def token_result(result: Any) -> Dict[str, Any]:
    """A ``token-get`` result: ``access_token``, ``token_type`` and ``expires_at`` when known."""
    if isinstance(result, dict) and isinstance(result.get("access_token"), str):
        return result
    raise ProtocolError("unexpected token-get result")  # never echo it: it may hold a token


def login_params(environment: Optional[str] = None, profile: Optional[str] = None) -> Dict[str, Any]:
    """The ``login`` params (the same members as ``token-get``)."""
    return token_get_params(environment, profile)


def login_result(result: Any) -> Dict[str, Any]:
    """A ``login`` result: ``environment``, ``profile``, ``loggedIn`` and, when known,
    ``expiresAt`` and the identity (``subject``, ``email``, ``name``)."""
    if isinstance(result, dict) and result.get("loggedIn") is True:
        return result
    raise ProtocolError("unexpected login result")  # never echo it


#: Events (and state changes) a subscription holds for its consumer before the client stops
#: reading the process's output, which makes tokenrelay pause the HTTP transfer.
DEFAULT_MAX_BUFFERED = 256


def subscription_id(result: Any) -> str:
    """The subscription id of a ``subscribe`` result."""
    if isinstance(result, dict) and isinstance(result.get("subscription"), (str, int)):
        return str(result["subscription"])
    raise ProtocolError(f"unexpected subscribe result: {result!r}")


_MISSING = object()


class Response:
    """The result of ``request``: any HTTP status is a response, not an error.

    ``status`` (int), ``headers`` (lower-case names; ``set-cookie`` a list),
    ``content`` (bytes), ``text`` (str), ``json()`` and ``elapsed`` (seconds)."""

    def __init__(self, result: Mapping[str, Any]) -> None:
        status = result.get("status")
        if not isinstance(status, int) or isinstance(status, bool):
            raise ProtocolError(f"request result without a status: {dict(result)!r}")
        self.status: int = status
        headers = result.get("headers")
        self.headers: Dict[str, Union[str, List[str]]] = dict(headers) if isinstance(headers, dict) else {}
        elapsed = result.get("elapsedMs")
        self.elapsed: float = float(elapsed) / 1000.0 if isinstance(elapsed, (int, float)) else 0.0
        self.raw: Dict[str, Any] = dict(result)
        self._json: Any = result.get("json", _MISSING)
        self._text: Optional[str] = result["text"] if isinstance(result.get("text"), str) else None
        self._base64: Optional[str] = result["base64"] if isinstance(result.get("base64"), str) else None

    @property
    def ok(self) -> bool:
        """True for a 2xx status."""
        return 200 <= self.status < 300

    @property
    def content(self) -> bytes:
        """The body as bytes (JSON bodies re-encoded compactly as UTF-8)."""
        if self._base64 is not None:
            return base64.b64decode(self._base64)
        if self._text is not None:
            return self._text.encode("utf-8")
        if self._json is not _MISSING:
            return _json.dumps(self._json, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return b""

    @property
    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        if self._text is not None:
            return self._text
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The parsed JSON body; parses ``text`` when the server did not."""
        if self._json is not _MISSING:
            return self._json
        return _json.loads(self.text)

    def __repr__(self) -> str:
        return f"<Response [{self.status}]>"


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event of a subscription."""

    data: str
    event: str = "message"
    id: Optional[str] = None
    retry: Optional[int] = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "Event":
        data = params.get("data")
        event = params.get("event")
        ident = params.get("id")
        retry = params.get("retry")
        return cls(
            data=data if isinstance(data, str) else "",
            event=event if isinstance(event, str) else "message",
            id=ident if isinstance(ident, str) else None,
            retry=retry if isinstance(retry, int) and not isinstance(retry, bool) else None,
        )


@dataclass(frozen=True)
class SubscriptionState:
    """A ``subscription-state`` notification: ``state`` is ``connecting``, ``open``,
    ``reconnecting`` or ``closed``; ``error`` is ``{kind, message}`` when present."""

    state: str
    attempt: Optional[int] = None
    retry_in_ms: Optional[int] = None
    status: Optional[int] = None
    error: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "SubscriptionState":
        def integer(name: str) -> Optional[int]:
            value = params.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        state = params.get("state")
        error = params.get("error")
        return cls(
            state=state if isinstance(state, str) else "unknown",
            attempt=integer("attempt"),
            retry_in_ms=integer("retryInMs"),
            status=integer("status"),
            error=dict(error) if isinstance(error, dict) else None,
            raw=dict(params),
        )

    @property
    def closed(self) -> bool:
        return self.state == "closed"


@dataclass(frozen=True)
class AuthPrompt:
    """An ``auth-prompt`` notification: what the person must do to finish a login.
    ``kind`` is ``browser`` (open ``url``) or ``device`` (open ``url`` and enter
    ``user_code``, or open ``verification_uri_complete``); ``expires_at`` is the ISO 8601
    time the prompt stops being valid."""

    environment: str
    profile: str
    kind: str
    url: str
    user_code: Optional[str] = None
    verification_uri_complete: Optional[str] = None
    expires_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "AuthPrompt":
        def text(name: str) -> Optional[str]:
            value = params.get(name)
            return value if isinstance(value, str) else None

        return cls(
            environment=text("environment") or "",
            profile=text("profile") or "",
            kind=text("kind") or "unknown",
            url=text("url") or "",
            user_code=text("userCode"),
            verification_uri_complete=text("verificationUriComplete"),
            expires_at=text("expiresAt"),
            raw=dict(params),
        )

    def matches(self, environment: Optional[str], profile: Optional[str]) -> bool:
        """Whether this prompt is for that login (``None`` matches any name: the defaults)."""
        return (environment is None or environment == self.environment) and (profile is None or profile == self.profile)


#: The notification a login in progress sends.
AUTH_PROMPT = "auth-prompt"

#: The notification a ``watch-sessions`` sends at each change of a session.
SESSION_CHANGED = "session-changed"


@dataclass(frozen=True)
class SessionChange:
    """A ``session-changed`` notification (``watch-sessions``): ``reason`` is ``valid``,
    ``login-required``, ``logged-in``, ``logged-out``, ``invalidated``, ``refresh-failed`` or
    ``expired``; ``state`` is the session's state as ``status`` shows it; ``login`` (with
    ``login-required``, while a login is under way) says what the person must do: ``url``, and
    ``userCode`` for a device login. Never a token."""

    environment: str
    profile: str
    state: str
    reason: str
    expires_at: Optional[str] = None
    login: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "SessionChange":
        def text(name: str) -> Optional[str]:
            value = params.get(name)
            return value if isinstance(value, str) else None

        login = params.get("login")
        return cls(
            environment=text("environment") or "",
            profile=text("profile") or "",
            state=text("state") or "unknown",
            reason=text("reason") or "unknown",
            expires_at=text("expiresAt"),
            login=dict(login) if isinstance(login, dict) else None,
            raw=dict(params),
        )

    @property
    def needs_login(self) -> bool:
        """Whether the person must log in (to show "log in to ENV/PROFILE")."""
        return self.reason == "login-required" or self.state == "interaction_required"


def watch_params(environment: Optional[str] = None, profile: Optional[str] = None) -> Dict[str, Any]:
    """The ``watch-sessions`` params."""
    return token_get_params(environment, profile)


# Incoming message classification -------------------------------------------------------

RESPONSE = "response"
NOTIFICATION = "notification"
SERVER_REQUEST = "request"


def parse_line(line: bytes) -> List[Any]:
    """Decodes one NDJSON line into its messages (a batch gives several). Raises
    :class:`ProtocolError` for a line that is not JSON."""
    text = line.decode("utf-8", errors="replace").strip()
    if not text:
        return []
    try:
        value = _json.loads(text)
    except ValueError as exc:
        raise ProtocolError(f"server sent a line that is not JSON: {exc}") from None
    return value if isinstance(value, list) else [value]


def classify(message: Any) -> Tuple[str, Any, Any]:
    """``(RESPONSE, id, result-or-RelayError)``, ``(NOTIFICATION, method, params)`` or
    ``(SERVER_REQUEST, id, message)``; raises :class:`ProtocolError` otherwise."""
    if not isinstance(message, dict):
        raise ProtocolError(f"server sent a non-object message: {message!r}")
    if "method" in message and isinstance(message["method"], str):
        if "id" in message:
            return SERVER_REQUEST, message["id"], message
        params = message.get("params")
        return NOTIFICATION, message["method"], params if isinstance(params, dict) else {}
    if "id" in message and ("result" in message or "error" in message):
        if "error" in message:
            return RESPONSE, message["id"], error_from_json(message["error"])
        return RESPONSE, message["id"], Ok(message["result"])
    raise ProtocolError(f"server sent an unrecognised message: {message!r}")


class Ok:
    """A successful result (wraps the value so ``None`` results stay distinguishable)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def unwrap(outcome: Union[Ok, RelayError]) -> Any:
    if isinstance(outcome, RelayError):
        raise outcome
    return outcome.value


def forward_log_line(line: bytes, logger: logging.Logger = SERVER_LOGGER) -> None:
    """Logs one stderr line of the server at the level it names (``tokenrelay warn: ...``
    or a JSON line with ``level``), INFO otherwise."""
    text = line.decode("utf-8", errors="replace").rstrip("\r\n")
    if not text:
        return
    level = logging.INFO
    if text.startswith("{"):
        try:
            record = _json.loads(text)
            if isinstance(record, dict) and isinstance(record.get("level"), str):
                level = _LEVELS.get(record["level"].lower(), logging.INFO)
        except ValueError:
            pass
    else:
        head = text.split(":", 1)[0].split()
        if head and head[-1].lower() in _LEVELS:
            level = _LEVELS[head[-1].lower()]
    logger.log(level, "%s", text)


def ids() -> Iterable[int]:
    n = 0
    while True:
        n += 1
        yield n


"""Exceptions raised by the tokenrelay client, one class per protocol error ``data.kind``."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Type


class RelayError(Exception):
    """Base class of every error the client raises.

    ``code`` is the JSON-RPC error code (``None`` for client-side errors), ``kind`` the
    stable ``data.kind`` string, ``message`` the server's message and ``data`` the whole
    ``error.data`` object.
    """

    def __init__(
        self,
        message: str,
        *,
        code: Optional[int] = None,
        kind: Optional[str] = None,
        data: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.kind = kind
        self.data: Dict[str, Any] = dict(data or {})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, kind={self.kind!r}, message={self.message!r})"


class ConfigError(RelayError):
    """``config``: the configuration could not be used."""


class UnknownEnvironment(RelayError):
    """``unknown_environment``: no such environment."""


class UnknownProfile(RelayError):
    """``unknown_profile``: no such profile."""


class AuthError(RelayError):
    """``auth``: token acquisition was refused.

    ``oauth_error`` / ``oauth_error_description`` carry the authorization server's
    ``error`` / ``error_description`` when it sent them.
    """

    @property
    def oauth_error(self) -> Optional[str]:
        value = self.data.get("oauthError")
        return value if isinstance(value, str) else None

    @property
    def oauth_error_description(self) -> Optional[str]:
        value = self.data.get("oauthErrorDescription")
        return value if isinstance(value, str) else None


class InteractionRequired(RelayError):
    """``interaction_required``: an interactive login is needed."""


class TransportError(RelayError):
    """``transport``: DNS, connection or TLS failure."""


class RelayTimeout(RelayError, TimeoutError):
    """``timeout``: the server's time bound ran out, or the client gave up waiting
    (then ``$/cancelRequest`` was sent). Also a builtin :class:`TimeoutError`."""


class Cancelled(RelayError):
    """``cancelled`` (-32800): the request was cancelled."""


class LimitExceeded(RelayError):
    """``limit``: a limit was exceeded (queue full, body too large)."""


class ShuttingDown(RelayError):
    """``shutting_down``: the request arrived after ``shutdown``."""


class NotSupported(RelayError):
    """``not_supported``: not supported by this build or configuration."""


class LoggedOut(RelayError):
    """``logged_out``: a ``logout`` ended the session the call was waiting on for a token."""


class StoreError(RelayError):
    """``store``: the session store could not be read or written (its write lock held by another
    program past the busy timeout, a disk failure, a record that does not open under its key)."""


class InvalidParams(RelayError):
    """``invalid_params`` (-32602). ``diagnostics`` is a list of ``{pointer, reason}``."""

    @property
    def diagnostics(self) -> List[Dict[str, Any]]:
        value = self.data.get("diagnostics")
        if isinstance(value, list):
            return [item for item in value if isinstance(item, dict)]
        return []


class ProtocolError(RelayError):
    """A JSON-RPC level failure (``parse``, ``invalid_request``, ``internal``) or a
    message from the server the client cannot understand."""


class MethodNotFound(ProtocolError):
    """``method_not_found`` (-32601)."""


class RelayClosed(RelayError):
    """The tokenrelay process exited or the client was closed. Pending calls fail with
    it at once; ``returncode`` is the exit status when known."""

    def __init__(self, message: str = "tokenrelay process is closed", *, returncode: Optional[int] = None) -> None:
        super().__init__(message, kind="closed")
        self.returncode = returncode


ERRORS_BY_KIND: Dict[str, Type[RelayError]] = {
    "config": ConfigError,
    "unknown_environment": UnknownEnvironment,
    "unknown_profile": UnknownProfile,
    "auth": AuthError,
    "interaction_required": InteractionRequired,
    "transport": TransportError,
    "timeout": RelayTimeout,
    "cancelled": Cancelled,
    "limit": LimitExceeded,
    "shutting_down": ShuttingDown,
    "not_supported": NotSupported,
    "logged_out": LoggedOut,
    "store": StoreError,
    "invalid_params": InvalidParams,
    "parse": ProtocolError,
    "invalid_request": ProtocolError,
    "internal": ProtocolError,
    "method_not_found": MethodNotFound,
}

_KIND_BY_CODE: Dict[int, str] = {
    -32700: "parse",
    -32600: "invalid_request",
    -32601: "method_not_found",
    -32602: "invalid_params",
    -32603: "internal",
    -32800: "cancelled",
    -32004: "config",
    -32005: "unknown_environment",
    -32003: "unknown_profile",
    -32010: "auth",
    -32011: "interaction_required",
    -32020: "transport",
    -32021: "timeout",
    -32022: "limit",
    -32030: "shutting_down",
    -32031: "not_supported",
    -32032: "logged_out",
    -32033: "store",
}


def error_from_json(error: Any) -> RelayError:
    """Maps a JSON-RPC ``error`` member to the matching exception: by ``data.kind``
    first, by code when the kind is missing or unknown, else the base class."""
    if not isinstance(error, dict):
        return ProtocolError(f"malformed error object: {error!r}")
    code = error.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    message = error.get("message")
    message = message if isinstance(message, str) else "unknown error"
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    kind = data.get("kind")
    kind = kind if isinstance(kind, str) else None
    cls = ERRORS_BY_KIND.get(kind or "")
    if cls is None and code is not None and code in _KIND_BY_CODE:
        cls = ERRORS_BY_KIND[_KIND_BY_CODE[code]]
        kind = kind or _KIND_BY_CODE[code]
    return (cls or RelayError)(message, code=code, kind=kind, data=data)

"""The synchronous client: one process, one reader thread demultiplexing responses by id
and routing notifications; safe to call from many threads at once."""

from __future__ import annotations

import collections
import io
import itertools
import logging
import os
import subprocess
import threading
import time
from typing import Any, Callable, Deque, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _core
from ._core import AuthPrompt, Event, Response, SubscriptionState
from .errors import ProtocolError, RelayClosed, RelayError, RelayTimeout, ShuttingDown

_log = logging.getLogger("tokenrelay")

#: Extra seconds the client waits past a request's own ``timeout`` before giving up itself.
TIMEOUT_SLACK = 5.0


class _Pending:
    __slots__ = ("done", "outcome", "on_result")

    def __init__(self, on_result: Optional[Callable[[Any], None]] = None) -> None:
        self.done = threading.Event()
        self.outcome: Union[_core.Ok, RelayError, None] = None
        self.on_result = on_result


_END = object()


class Subscription:
    """An event stream: iterate it for :class:`Event` objects; ``state`` holds the latest
    :class:`SubscriptionState`; ``close()`` (or leaving ``with``) unsubscribes.

    At most ``max_buffered`` events wait for the consumer. When that many are waiting, the
    client stops reading the process's output until the consumer takes one, so tokenrelay
    pauses the HTTP transfer instead of the client growing (answers to other calls on the same
    :class:`Relay` wait too: consume or close a subscription you no longer read).

    Iteration ends after the server reports ``closed``; it raises :class:`RelayClosed`
    if the process goes away."""

    def __init__(
        self, relay: "Relay", on_state: Optional[Callable[[SubscriptionState], None]],
        max_buffered: int = _core.DEFAULT_MAX_BUFFERED,
    ) -> None:
        if max_buffered < 1:
            raise ValueError("max_buffered must be at least 1")
        self._relay = relay
        self._items: Deque[Any] = collections.deque()
        self._changed = threading.Condition()  # guards _items and _closed
        self._max_buffered = max_buffered
        self._on_state = on_state
        self._closed = False
        self.id: Optional[str] = None
        self.state: Optional[SubscriptionState] = None
        #: The most items that were ever waiting at once (never above ``max_buffered``).
        self.high_water = 0

    # Called on the reader thread: waits while the buffer is full (back-pressure).
    def _deliver(self, item: Any, bounded: bool = True) -> None:
        if isinstance(item, SubscriptionState):
            self.state = item
        with self._changed:
            while bounded and not self._closed and len(self._items) >= self._max_buffered:
                self._changed.wait()
            if self._closed and bounded:
                return  # nobody reads a closed subscription
            self._items.append(item)
            self.high_water = max(self.high_water, len(self._items))
            self._changed.notify_all()

    def _take(self, timeout: Optional[float]) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while not self._items:
                if self._closed:
                    return _END
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise RelayTimeout(f"no event within {timeout} s", kind="timeout")
                self._changed.wait(remaining)
            item = self._items.popleft()
            self._changed.notify_all()
            return item

    def get(self, timeout: Optional[float] = None) -> Event:
        """The next event; raises :class:`StopIteration` at the end and
        :class:`RelayTimeout` if none arrives within ``timeout`` seconds."""
        while True:
            if self._closed:
                raise StopIteration
            item = self._take(timeout)
            if isinstance(item, Event):
                return item
            if isinstance(item, SubscriptionState):
                if self._on_state is not None:
                    self._on_state(item)
                if item.closed:
                    self._finish()
                    raise StopIteration
                continue
            if isinstance(item, RelayError):
                self._mark_closed()
                raise item
            if item is _END:
                raise StopIteration

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return self.get()

    def _mark_closed(self) -> bool:
        """Marks the subscription closed (waking a reader held by back-pressure); returns
        whether it was open."""
        with self._changed:
            was_open = not self._closed
            self._closed = True
            self._items.clear()
            self._changed.notify_all()
        return was_open

    def _finish(self) -> None:
        self._mark_closed()
        if self.id is not None:
            self._relay._forget_subscription(self.id)

    def close(self) -> None:
        """Unsubscribes (idempotent; quiet if the process is already gone)."""
        if not self._mark_closed():
            return
        if self.id is not None:
            try:
                self._relay.call("unsubscribe", {"subscription": self.id}, timeout=10)
            except RelayError:
                pass
            self._relay._forget_subscription(self.id)

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Call:
    """A request in flight (from :meth:`Relay.start_call`)."""

    def __init__(self, relay: "Relay", id: int, method: str, pending: _Pending) -> None:
        self._relay = relay
        self.id = id
        self.method = method
        self._pending = pending

    def done(self) -> bool:
        return self._pending.done.is_set()

    def result(self, timeout: Optional[float] = None) -> Any:
        """Waits for the answer. On ``timeout`` (seconds) or an interrupt the request is
        abandoned: ``$/cancelRequest`` is sent and :class:`RelayTimeout` raised (or the
        interrupt re-raised)."""
        try:
            if not self._pending.done.wait(timeout):
                self._relay._abandon(self.id)
                raise RelayTimeout(f"no answer to {self.method} within {timeout} s; cancelled", kind="timeout")
        except BaseException:
            self._relay._abandon(self.id)
            raise
        assert self._pending.outcome is not None
        return _core.unwrap(self._pending.outcome)

    def cancel(self) -> None:
        """Sends ``$/cancelRequest``; the server then answers with -32800, which
        :meth:`result` raises as :class:`Cancelled`."""
        if not self.done():
            try:
                self._relay.notify("$/cancelRequest", {"id": self.id})
            except RelayError:
                pass


class Relay:
    """A tokenrelay process and a client for it.

    ``Relay(config=None, env=None, binary=None, args=(), log_level=None, environ=None)``
    starts the binary (found from ``binary``, ``$TOKENRELAY_BIN`` or ``PATH``) at once.
    Use it as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        config: Optional[Union[str, "os.PathLike[str]"]] = None,
        env: Optional[str] = None,
        binary: Optional[str] = None,
        args: Sequence[str] = (),
        log_level: Optional[str] = None,
        environ: Optional[Mapping[str, str]] = None,
        on_notification: Optional[Callable[[str, Dict[str, Any]], None]] = None,
        on_auth_prompt: Optional[Callable[[AuthPrompt], None]] = None,
    ) -> None:
        executable = _core.find_binary(binary, environ)
        self.argv: List[str] = _core.build_argv(executable, config=config, env=env, log_level=log_level, args=args)
        self._on_notification = on_notification
        self._on_auth_prompt = on_auth_prompt
        # Callbacks of login() calls in progress: (environment, profile, on_prompt).
        self._prompt_listeners: List[Tuple[Optional[str], Optional[str], Callable[[AuthPrompt], None]]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: Dict[Any, _Pending] = {}
        self._subscriptions: Dict[str, Subscription] = {}
        self._closed_error: Optional[RelayClosed] = None
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(environ) if environ is not None else None,
            bufsize=0,
        )
        self._reader = threading.Thread(target=self._read_loop, name="tokenrelay-reader", daemon=True)
        self._stderr = threading.Thread(target=self._stderr_loop, name="tokenrelay-stderr", daemon=True)
        self._reader.start()
        self._stderr.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    # Reading -----------------------------------------------------------------------

    def _stderr_loop(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        for line in iter(stream.readline, b""):
            _core.forward_log_line(line)

    def _read_loop(self) -> None:
        assert self.process.stdout is not None
        # At most one 64 KiB chunk read ahead: while a subscription's buffer is full this thread
        # waits in _deliver, the pipe fills and tokenrelay pauses (SPEC §7).
        stream = io.BufferedReader(self.process.stdout, 65536)  # type: ignore[arg-type]
        try:
            for line in iter(stream.readline, b""):
                try:
                    messages = _core.parse_line(line)
                except ProtocolError as exc:
                    _log.warning("%s", exc)
                    continue
                for message in messages:
                    try:
                        self._dispatch(message)
                    except ProtocolError as exc:
                        _log.warning("%s", exc)
        finally:
            returncode = None
            try:
                returncode = self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            self._fail_all(RelayClosed(f"tokenrelay process exited (status {returncode})", returncode=returncode))

    def _dispatch(self, message: Any) -> None:
        shape, key, value = _core.classify(message)
        if shape == _core.RESPONSE:
            with self._lock:
                pending = self._pending.pop(key, None)
            if pending is None:
                if key is not None:
                    _log.debug("response for unknown id %r", key)
                else:
                    _log.warning("server reported an error without id: %r", value)
                return
            if pending.on_result is not None and isinstance(value, _core.Ok):
                try:
                    pending.on_result(value.value)
                except RelayError as exc:
                    value = exc
            pending.outcome = value
            pending.done.set()
        elif shape == _core.NOTIFICATION:
            self._notification(key, value)
        else:
            _log.debug("ignoring server request %r", value)

    def _notification(self, method: str, params: Dict[str, Any]) -> None:
        if method in ("event", "subscription-state"):
            sub_id = params.get("subscription")
            with self._lock:
                subscription = self._subscriptions.get(str(sub_id))
            if subscription is None:
                _log.debug("%s for unknown subscription %r", method, sub_id)
                return
            if method == "event":
                subscription._deliver(Event.from_params(params))
            else:
                subscription._deliver(SubscriptionState.from_params(params))
        else:
            if method == _core.AUTH_PROMPT:
                self._auth_prompt(AuthPrompt.from_params(params))
            if self._on_notification is not None:
                try:
                    self._on_notification(method, params)
                except Exception:  # a callback bug must not kill the reader
                    _log.exception("on_notification callback failed")

    def _auth_prompt(self, prompt: AuthPrompt) -> None:
        with self._lock:
            callbacks = [callback for environment, profile, callback in self._prompt_listeners
                         if prompt.matches(environment, profile)]
        if self._on_auth_prompt is not None:
            callbacks.insert(0, self._on_auth_prompt)
        for callback in callbacks:
            try:
                callback(prompt)
            except Exception:  # a callback bug must not kill the reader
                _log.exception("auth-prompt callback failed")

    def _fail_all(self, error: RelayClosed) -> None:
        with self._lock:
            if self._closed_error is None:
                self._closed_error = error
            pending = list(self._pending.values())
            self._pending.clear()
            subscriptions = list(self._subscriptions.values())
            self._subscriptions.clear()
        for entry in pending:
            entry.outcome = self._closed_error
            entry.done.set()
        for subscription in subscriptions:
            subscription._deliver(self._closed_error, bounded=False)

    def _forget_subscription(self, sub_id: str) -> None:
        with self._lock:
            self._subscriptions.pop(sub_id, None)

    # Writing -----------------------------------------------------------------------

    def _send(self, message: Mapping[str, Any]) -> None:
        data = _core.encode_message(message)
        stream = self.process.stdin
        assert stream is not None
        with self._write_lock:
            if self._closed_error is not None:
                raise self._closed_error
            try:
                stream.write(data)
                stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                raise self._closed_error or RelayClosed("tokenrelay process is not accepting input") from None

    def notify(self, method: str, params: Optional[Mapping[str, Any]] = None) -> None:
        """Sends a notification."""
        self._send(_core.notification_message(method, params))

    def start_call(
        self,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        _on_result: Optional[Callable[[Any], None]] = None,
    ) -> "Call":
        """Sends a request without waiting: the returned :class:`Call` has ``id``,
        ``result(timeout)`` and ``cancel()`` (usable from any thread)."""
        request_id = next(self._ids)
        pending = _Pending(_on_result)
        with self._lock:
            if self._closed_error is not None:
                raise self._closed_error
            self._pending[request_id] = pending
        try:
            self._send(_core.request_message(request_id, method, params))
        except BaseException:
            with self._lock:
                self._pending.pop(request_id, None)
            raise
        return Call(self, request_id, method, pending)

    def call(
        self,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Optional[float] = None,
        _on_result: Optional[Callable[[Any], None]] = None,
    ) -> Any:
        """Sends any request and returns its result. If no answer arrives within
        ``timeout`` seconds, or the wait is interrupted (KeyboardInterrupt), it sends
        ``$/cancelRequest`` and raises :class:`RelayTimeout` (or re-raises)."""
        return self.start_call(method, params, _on_result=_on_result).result(timeout)

    def _abandon(self, request_id: int) -> None:
        with self._lock:
            still_pending = self._pending.pop(request_id, None) is not None
        if still_pending:
            try:
                self._send(_core.cancel_message(request_id))
            except RelayError:
                pass

    # The API -----------------------------------------------------------------------

    def initialize(self, **params: Any) -> Dict[str, Any]:
        """``initialize``: server info, protocol version, environments, capabilities."""
        result = self.call("initialize", params or {"processId": os.getpid()})
        return result if isinstance(result, dict) else {}

    def ping(self, timeout: Optional[float] = None) -> None:
        """``ping``."""
        self.call("ping", timeout=timeout)

    def request(
        self,
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
    ) -> Response:
        """An authenticated HTTP request. Any HTTP status is a :class:`Response`; failures
        to get one raise a :class:`RelayError` subclass."""
        params = _core.request_params(
            method, path, url=url, path_params=path_params, query=query, headers=headers, json=json,
            text=text, content=content, environment=environment, profile=profile, timeout=timeout, auth=auth)
        wait = None if timeout is None else timeout + TIMEOUT_SLACK
        result = self.call("request", params, timeout=wait)
        if not isinstance(result, dict):
            raise ProtocolError(f"unexpected request result: {result!r}")
        return Response(result)

    def invalidate(self, environment: Optional[str] = None, profile: Optional[str] = None, all: bool = False) -> int:
        """``token-invalidate``: how many sessions were invalidated."""
        return _core.invalidated_count(self.call("token-invalidate", _core.invalidate_params(environment, profile, all)))

    def logout(self, environment: Optional[str] = None, profile: Optional[str] = None, all: bool = False) -> int:
        """``logout``: drops tokens and refresh state (revoking where the server offers it);
        how many sessions were logged out."""
        result = self.call("logout", _core.invalidate_params(environment, profile, all))
        return _core.invalidated_count(result, "loggedOut", "logout")

    def login(
        self,
        environment: Optional[str] = None,
        profile: Optional[str] = None,
        *,
        on_prompt: Optional[Callable[[AuthPrompt], None]] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """``login``: starts (or joins) the interactive login of that session and returns once
        it is stored: ``{environment, profile, loggedIn, expiresAt?, subject?, email?, name?}``.

        ``on_prompt`` receives each :class:`AuthPrompt` for this login (the URL to open, the
        device user code) on the reader thread: show it, start something, return quickly.
        Raises :class:`InteractionRequired` when the person did not finish within the
        profile's ``login_timeout``, :class:`AuthError` when the server refused,
        :class:`LimitExceeded` after too many failed attempts, :class:`Cancelled`; past
        ``timeout`` seconds it cancels the login and raises :class:`RelayTimeout`."""
        listener = (environment, profile, on_prompt) if on_prompt is not None else None
        if listener is not None:
            with self._lock:
                self._prompt_listeners.append(listener)
        try:
            return _core.login_result(self.call("login", _core.login_params(environment, profile), timeout=timeout))
        finally:
            if listener is not None:
                with self._lock:
                    self._prompt_listeners.remove(listener)

    def token_get(self, environment: Optional[str] = None, profile: Optional[str] = None) -> Dict[str, Any]:
        """``token-get``: ``{access_token, token_type, expires_at?}``, only for profiles with
        ``expose_token: true`` (credential-helper use); :class:`NotSupported` otherwise."""
        return _core.token_result(self.call("token-get", _core.token_get_params(environment, profile)))

    def status(self) -> Dict[str, Any]:
        """``status``: sessions and subscriptions (never a token value)."""
        result = self.call("status", {})
        return result if isinstance(result, dict) else {}

    def subscribe(
        self,
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
        on_state: Optional[Callable[[SubscriptionState], None]] = None,
        max_buffered: int = _core.DEFAULT_MAX_BUFFERED,
    ) -> Subscription:
        """Follows an SSE stream; returns once the server registered it. At most
        ``max_buffered`` events wait for the consumer; past that the client stops reading
        the process's output (tokenrelay then pauses the HTTP transfer). With
        ``until_closed=True`` a stream the server ends cleanly ends the iteration instead of
        being reconnected (drops and errors still reconnect)."""
        params = _core.subscribe_params(
            path, url=url, path_params=path_params, query=query, headers=headers, environment=environment,
            profile=profile, timeout=timeout, auth=auth, last_event_id=last_event_id,
            until_closed=until_closed)
        subscription = Subscription(self, on_state, max_buffered)

        def register(result: Any) -> None:  # on the reader thread, before any notification
            subscription.id = _core.subscription_id(result)
            with self._lock:
                self._subscriptions[subscription.id] = subscription

        self.call("subscribe", params, _on_result=register)
        return subscription

    # Shutdown ----------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> Optional[int]:
        """``shutdown`` + ``exit``, then SIGTERM, then SIGKILL, each bounded; returns the
        exit status. Idempotent."""
        process = self.process
        with self._lock:
            subscriptions = list(self._subscriptions.values())
        for subscription in subscriptions:  # they end here; none may hold the reader any more
            subscription._mark_closed()
        if process.poll() is None and self._closed_error is None:
            with self._lock:
                in_flight = list(self._pending)
            for request_id in in_flight:  # nobody will read those answers
                try:
                    self._send(_core.cancel_message(request_id))
                except RelayError:
                    break
            try:
                self.call("shutdown", timeout=timeout / 2)
            except ShuttingDown:
                pass  # shut down already: exit is still accepted
            except (RelayError, OSError):
                pass
            try:
                self.notify("exit")
            except (RelayError, OSError):
                pass
        for stream in (process.stdin,):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            process.wait(timeout=timeout / 2)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=timeout / 2)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._fail_all(RelayClosed("tokenrelay client is closed", returncode=process.returncode))
        for thread in (self._reader, self._stderr):
            if thread is not threading.current_thread():
                thread.join(timeout=timeout)
        for stream in (process.stdout, process.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        return process.returncode

    def __enter__(self) -> "Relay":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        process = getattr(self, "process", None)
        if process is not None and process.poll() is None:
            try:
                process.kill()
            except OSError:
                pass

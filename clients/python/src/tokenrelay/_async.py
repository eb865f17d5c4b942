"""The asyncio client: the same protocol core as :class:`Relay`, on
``asyncio.create_subprocess_exec``; concurrent tasks share one process."""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
from typing import Any, AsyncIterator, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _core
from ._core import AuthPrompt, Event, Response, SessionChange, SubscriptionState
from ._sync import TIMEOUT_SLACK
from .errors import ProtocolError, RelayClosed, RelayError, RelayTimeout

_log = logging.getLogger("tokenrelay")
_END = object()
#: The longest line the client accepts (tokenrelay's own messages stay under 64 MiB).
_LINE_LIMIT = 128 * 1024 * 1024
#: How much the pipe reader buffers ahead of the consumer (asyncio pauses the transport past
#: twice this), so a full subscription buffer stops reading the process's output.
_READ_CHUNK = 64 * 1024


class AsyncSubscription:
    """An event stream: ``async for event in subscription``; ``state`` holds the latest
    :class:`SubscriptionState`; ``await close()`` (or leaving ``async with``) unsubscribes.

    At most ``max_buffered`` events wait for the consumer; when that many are waiting the
    client stops reading the process's output until the consumer takes one, so tokenrelay
    pauses the HTTP transfer instead of the client growing (answers to other calls on the same
    :class:`AsyncRelay` wait too: consume or close a subscription you no longer read)."""

    def __init__(
        self, relay: "AsyncRelay", on_state: Optional[Callable[[SubscriptionState], None]],
        max_buffered: int = _core.DEFAULT_MAX_BUFFERED,
    ) -> None:
        if max_buffered < 1:
            raise ValueError("max_buffered must be at least 1")
        self._relay = relay
        self._items: Deque[Any] = collections.deque()
        self._max_buffered = max_buffered
        self._readable = asyncio.Event()  # set while items wait or the subscription is closed
        self._writable = asyncio.Event()  # set while there is room (or it is closed)
        self._writable.set()
        self._on_state = on_state
        self._closed = False
        self.id: Optional[str] = None
        self.state: Optional[SubscriptionState] = None
        #: The most items that were ever waiting at once (never above ``max_buffered``).
        self.high_water = 0

    def _put(self, item: Any) -> None:
        self._items.append(item)
        self.high_water = max(self.high_water, len(self._items))
        self._readable.set()
        if len(self._items) >= self._max_buffered:
            self._writable.clear()

    async def _deliver(self, item: Any) -> None:
        """Called by the reader: waits while the buffer is full (back-pressure)."""
        if isinstance(item, SubscriptionState):
            self.state = item
        while not self._closed and len(self._items) >= self._max_buffered:
            await self._writable.wait()
        if not self._closed:
            self._put(item)

    def _deliver_now(self, item: Any) -> None:
        """An error ending the subscription: never waits."""
        self._put(item)

    async def _take(self, timeout: Optional[float]) -> Any:
        while not self._items:
            if self._closed:
                return _END
            self._readable.clear()
            try:
                await asyncio.wait_for(self._readable.wait(), timeout)
            except asyncio.TimeoutError:
                raise RelayTimeout(f"no event within {timeout} s", kind="timeout") from None
        item = self._items.popleft()
        if len(self._items) < self._max_buffered:
            self._writable.set()
        return item

    async def get(self, timeout: Optional[float] = None) -> Event:
        """The next event; raises :class:`StopAsyncIteration` at the end and
        :class:`RelayTimeout` if none arrives within ``timeout`` seconds."""
        while True:
            if self._closed:
                raise StopAsyncIteration
            item = await self._take(timeout)
            if isinstance(item, Event):
                return item
            if isinstance(item, SubscriptionState):
                if self._on_state is not None:
                    self._on_state(item)
                if item.closed:
                    self._finish()
                    raise StopAsyncIteration
                continue
            if isinstance(item, RelayError):
                self._mark_closed()
                raise item
            if item is _END:
                raise StopAsyncIteration

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        return await self.get()

    def _mark_closed(self) -> bool:
        """Marks it closed (releasing a reader held by back-pressure); returns whether it was open."""
        was_open = not self._closed
        self._closed = True
        self._items.clear()
        self._readable.set()
        self._writable.set()
        return was_open

    def _finish(self) -> None:
        self._mark_closed()
        if self.id is not None:
            self._relay._subscriptions.pop(self.id, None)

    async def close(self) -> None:
        """Unsubscribes (idempotent; quiet if the process is already gone)."""
        if not self._mark_closed():
            return
        if self.id is not None:
            try:
                await self._relay.call("unsubscribe", {"subscription": self.id}, timeout=10)
            except RelayError:
                pass
            self._relay._subscriptions.pop(self.id, None)

    async def __aenter__(self) -> "AsyncSubscription":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncSessionWatch:
    """Session changes (``watch-sessions``) as an async iterator of :class:`SessionChange`:
    ``sessions`` is every followed session when the watch began (as ``status`` shows them);
    iterating yields each change, those other tokenrelay processes sharing the store make
    included, until :meth:`close` (``unwatch-sessions``) or the relay ends."""

    def __init__(self, relay: "AsyncRelay") -> None:
        self._relay = relay
        self._queue: "asyncio.Queue[Optional[SessionChange]]" = asyncio.Queue()
        self._ended = False
        self.sessions: List[Dict[str, Any]] = []

    def _put(self, change: Optional[SessionChange]) -> None:
        self._queue.put_nowait(change)

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._queue.put_nowait(None)

    def __aiter__(self) -> AsyncIterator[SessionChange]:
        return self

    async def __anext__(self) -> SessionChange:
        change = await self._queue.get()
        if change is None:
            self._queue.put_nowait(None)  # every later call ends too
            raise StopAsyncIteration
        return change

    async def close(self) -> None:
        """``unwatch-sessions``; the iteration ends."""
        if self._relay._session_watch is self:
            self._relay._session_watch = None
            try:
                await self._relay.call("unwatch-sessions", {})
            except RelayError:
                pass
        self._end()

    async def __aenter__(self) -> "AsyncSessionWatch":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncRelay:
    """The asyncio client. ``async with AsyncRelay(...) as relay:`` starts the process and
    shuts it down; or ``await relay.start()`` / ``await relay.close()``."""

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
        self._environ = dict(environ) if environ is not None else None
        self._on_notification = on_notification
        self._on_auth_prompt = on_auth_prompt
        # Callbacks of login() calls in progress: (environment, profile, on_prompt).
        self._prompt_listeners: List[Tuple[Optional[str], Optional[str], Callable[[AuthPrompt], None]]] = []
        self._ids = itertools.count(1)
        self._pending: Dict[Any, "asyncio.Future[Any]"] = {}
        self._hooks: Dict[Any, Callable[[Any], None]] = {}
        self._subscriptions: Dict[str, AsyncSubscription] = {}
        self._session_watch: Optional[AsyncSessionWatch] = None
        self._closed_error: Optional[RelayClosed] = None
        self.process: Optional[asyncio.subprocess.Process] = None
        self._tasks: List["asyncio.Task[None]"] = []
        self._start_lock: Optional[asyncio.Lock] = None

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process is not None else None

    async def start(self) -> "AsyncRelay":
        """Starts the process (once)."""
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self.process is None:
                self.process = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=self._environ,
                    limit=_READ_CHUNK,
                )
                self._tasks = [
                    asyncio.ensure_future(self._read_loop()),
                    asyncio.ensure_future(self._stderr_loop()),
                ]
        return self

    async def _stderr_loop(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while True:
            line = await self.process.stderr.readline()
            if not line:
                return
            _core.forward_log_line(line)

    async def _read_loop(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stream = self.process.stdout
        partial = bytearray()
        oversized = False
        try:
            while True:
                chunk = await stream.read(_READ_CHUNK)
                if not chunk:
                    break
                start = 0
                while True:
                    newline = chunk.find(b"\n", start)
                    if newline < 0:
                        if not oversized:
                            partial += chunk[start:]
                            if len(partial) > _LINE_LIMIT:
                                _log.warning("server sent an oversized line; dropped")
                                partial.clear()
                                oversized = True
                        break
                    if oversized:
                        oversized = False
                    else:
                        partial += chunk[start:newline + 1]
                        await self._receive_line(bytes(partial))
                    partial.clear()
                    start = newline + 1
            if partial and not oversized:  # a last line without a newline
                await self._receive_line(bytes(partial))
        finally:
            returncode: Optional[int] = None
            try:
                returncode = await asyncio.wait_for(self.process.wait(), 2)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
            self._fail_all(RelayClosed(f"tokenrelay process exited (status {returncode})", returncode=returncode))

    async def _receive_line(self, line: bytes) -> None:
        try:
            messages = _core.parse_line(line)
        except ProtocolError as exc:
            _log.warning("%s", exc)
            return
        for message in messages:
            try:
                delivery = self._dispatch(message)
            except ProtocolError as exc:
                _log.warning("%s", exc)
                continue
            if delivery is not None:  # waits while that subscription's buffer is full
                subscription, item = delivery
                await subscription._deliver(item)

    def _dispatch(self, message: Any) -> Optional[Tuple[AsyncSubscription, Any]]:
        """Handles one message; returns the subscription and item to deliver for its stream."""
        shape, key, value = _core.classify(message)
        if shape == _core.RESPONSE:
            future = self._pending.pop(key, None)
            hook = self._hooks.pop(key, None)
            if future is None or future.done():
                return None
            if isinstance(value, RelayError):
                future.set_exception(value)
                return None
            if hook is not None:
                try:
                    hook(value.value)
                except RelayError as exc:
                    future.set_exception(exc)
                    return None
            future.set_result(value.value)
        elif shape == _core.NOTIFICATION:
            if key in ("event", "subscription-state"):
                subscription = self._subscriptions.get(str(value.get("subscription")))
                if subscription is None:
                    return None
                item = Event.from_params(value) if key == "event" else SubscriptionState.from_params(value)
                return subscription, item
            else:
                if key == _core.AUTH_PROMPT:
                    self._auth_prompt(AuthPrompt.from_params(value))
                elif key == _core.SESSION_CHANGED and self._session_watch is not None:
                    self._session_watch._put(SessionChange.from_params(value))
                if self._on_notification is not None:
                    try:
                        self._on_notification(key, value)
                    except Exception:
                        _log.exception("on_notification callback failed")
        return None

    def _auth_prompt(self, prompt: AuthPrompt) -> None:
        callbacks = [callback for environment, profile, callback in self._prompt_listeners
                     if prompt.matches(environment, profile)]
        if self._on_auth_prompt is not None:
            callbacks.insert(0, self._on_auth_prompt)
        for callback in callbacks:
            try:
                callback(prompt)
            except Exception:  # a callback bug must not stop the reader
                _log.exception("auth-prompt callback failed")

    def _fail_all(self, error: RelayClosed) -> None:
        if self._closed_error is None:
            self._closed_error = error
        if self._session_watch is not None:
            self._session_watch._end()
        pending = list(self._pending.values())
        self._pending.clear()
        self._hooks.clear()
        for future in pending:
            if not future.done():
                future.set_exception(self._closed_error)
        subscriptions = list(self._subscriptions.values())
        self._subscriptions.clear()
        for subscription in subscriptions:
            subscription._deliver_now(self._closed_error)

    async def _send(self, message: Mapping[str, Any]) -> None:
        if self.process is None:
            await self.start()
        if self._closed_error is not None:
            raise self._closed_error
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(_core.encode_message(message))
            await self.process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError, RuntimeError, OSError):
            raise self._closed_error or RelayClosed("tokenrelay process is not accepting input") from None

    async def notify(self, method: str, params: Optional[Mapping[str, Any]] = None) -> None:
        """Sends a notification."""
        await self._send(_core.notification_message(method, params))

    async def call(
        self,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Optional[float] = None,
        _on_result: Optional[Callable[[Any], None]] = None,
    ) -> Any:
        """Sends any request and returns its result. Cancelling the awaiting task, or no
        answer within ``timeout`` seconds (:class:`RelayTimeout`), sends ``$/cancelRequest``."""
        if self.process is None:
            await self.start()
        if self._closed_error is not None:
            raise self._closed_error
        request_id = next(self._ids)
        future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        if _on_result is not None:
            self._hooks[request_id] = _on_result
        try:
            await self._send(_core.request_message(request_id, method, params))
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            await self._abandon(request_id)
            raise RelayTimeout(f"no answer to {method} within {timeout} s; cancelled", kind="timeout") from None
        except asyncio.CancelledError:
            await asyncio.shield(self._abandon(request_id))
            raise
        finally:
            self._pending.pop(request_id, None)
            self._hooks.pop(request_id, None)

    async def _abandon(self, request_id: int) -> None:
        future = self._pending.pop(request_id, None)
        self._hooks.pop(request_id, None)
        if future is not None and not future.done():
            future.cancel()
            try:
                await self._send(_core.cancel_message(request_id))
            except RelayError:
                pass

    # The API -----------------------------------------------------------------------

    async def initialize(self, **params: Any) -> Dict[str, Any]:
        """``initialize``."""
        result = await self.call("initialize", params or {"processId": os.getpid()})
        return result if isinstance(result, dict) else {}

    async def ping(self, timeout: Optional[float] = None) -> None:
        """``ping``."""
        await self.call("ping", timeout=timeout)

    async def request(
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
        """An authenticated HTTP request (see :meth:`Relay.request`)."""
        params = _core.request_params(
            method, path, url=url, path_params=path_params, query=query, headers=headers, json=json,
            text=text, content=content, environment=environment, profile=profile, timeout=timeout, auth=auth)
        wait = None if timeout is None else timeout + TIMEOUT_SLACK
        result = await self.call("request", params, timeout=wait)
        if not isinstance(result, dict):
            raise ProtocolError(f"unexpected request result: {result!r}")
        return Response(result)

    async def invalidate(self, environment: Optional[str] = None, profile: Optional[str] = None, all: bool = False) -> int:
        """``token-invalidate``: how many sessions were invalidated."""
        return _core.invalidated_count(await self.call("token-invalidate", _core.invalidate_params(environment, profile, all)))

    async def logout(self, environment: Optional[str] = None, profile: Optional[str] = None, all: bool = False) -> int:
        """``logout``: drops tokens and refresh state (revoking where the server offers it);
        how many sessions were logged out."""
        result = await self.call("logout", _core.invalidate_params(environment, profile, all))
        return _core.invalidated_count(result, "loggedOut", "logout")

    async def login(
        self,
        environment: Optional[str] = None,
        profile: Optional[str] = None,
        *,
        on_prompt: Optional[Callable[[AuthPrompt], None]] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """``login``: as :meth:`Relay.login`; ``on_prompt`` is called on the event loop
        (it must not block: schedule work with ``asyncio.create_task``)."""
        listener = (environment, profile, on_prompt) if on_prompt is not None else None
        if listener is not None:
            self._prompt_listeners.append(listener)
        try:
            return _core.login_result(await self.call("login", _core.login_params(environment, profile), timeout=timeout))
        finally:
            if listener is not None:
                self._prompt_listeners.remove(listener)

    async def token_get(self, environment: Optional[str] = None, profile: Optional[str] = None) -> Dict[str, Any]:
        """``token-get``: ``{access_token, token_type, expires_at?}``, only for profiles with
        ``expose_token: true`` (credential-helper use); :class:`NotSupported` otherwise."""
        return _core.token_result(await self.call("token-get", _core.token_get_params(environment, profile)))

    async def status(self) -> Dict[str, Any]:
        """``status``."""
        result = await self.call("status", {})
        return result if isinstance(result, dict) else {}

    async def watch_sessions(
        self, environment: Optional[str] = None, profile: Optional[str] = None
    ) -> AsyncSessionWatch:
        """``watch-sessions``: every followed session now (``.sessions``), then each change as it
        happens (``async for change in watch``); one watch per relay (a new one ends the last)."""
        watch = AsyncSessionWatch(self)
        previous, self._session_watch = self._session_watch, watch
        if previous is not None:
            previous._end()
        result = await self.call("watch-sessions", _core.watch_params(environment, profile))
        sessions = result.get("sessions") if isinstance(result, dict) else None
        watch.sessions = list(sessions) if isinstance(sessions, list) else []
        return watch

    async def login_complete(
        self, url: str, environment: Optional[str] = None, profile: Optional[str] = None
    ) -> None:
        """``login-complete``: hands the login in progress the URL the browser was redirected to
        (the browser is on another machine); the pending :meth:`login` then answers."""
        params = _core.watch_params(environment, profile)
        params["url"] = url
        await self.call("login-complete", params)

    async def subscribe(
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
    ) -> AsyncSubscription:
        """Follows an SSE stream; returns once the server registered it. At most
        ``max_buffered`` events wait for the consumer; past that the client stops reading
        the process's output (tokenrelay then pauses the HTTP transfer). With
        ``until_closed=True`` a stream the server ends cleanly ends the iteration instead of
        being reconnected (drops and errors still reconnect)."""
        params = _core.subscribe_params(
            path, url=url, path_params=path_params, query=query, headers=headers, environment=environment,
            profile=profile, timeout=timeout, auth=auth, last_event_id=last_event_id,
            until_closed=until_closed)
        subscription = AsyncSubscription(self, on_state, max_buffered)

        def register(result: Any) -> None:  # in the reader, before the next message
            subscription.id = _core.subscription_id(result)
            self._subscriptions[subscription.id] = subscription

        await self.call("subscribe", params, _on_result=register)
        return subscription

    async def close(self, timeout: float = 5.0) -> Optional[int]:
        """``shutdown`` + ``exit``, then SIGTERM, then SIGKILL, each bounded."""
        process = self.process
        if process is None:
            return None
        for subscription in list(self._subscriptions.values()):  # they end here; none may hold the reader
            subscription._mark_closed()
        if process.returncode is None and self._closed_error is None:
            for request_id in list(self._pending):  # nobody will read those answers
                try:
                    await self._send(_core.cancel_message(request_id))
                except RelayError:
                    break
            try:
                await self.call("shutdown", timeout=timeout / 2)
            except (RelayError, OSError):
                pass  # ShuttingDown included: exit is still accepted
            try:
                await self.notify("exit")
            except (RelayError, OSError):
                pass
        if process.stdin is not None:
            try:
                process.stdin.close()
            except (OSError, RuntimeError):
                pass
        try:
            await asyncio.wait_for(process.wait(), timeout / 2)
        except asyncio.TimeoutError:
            try:
                process.terminate()
                await asyncio.wait_for(process.wait(), timeout / 2)
            except ProcessLookupError:
                pass
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()
        self._fail_all(RelayClosed("tokenrelay client is closed", returncode=process.returncode))
        for task in self._tasks:
            try:
                await asyncio.wait_for(task, timeout)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        return process.returncode

    async def __aenter__(self) -> "AsyncRelay":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

"""The clients against the fake server: every method, every error class, subscriptions,
cancellation and a crashed process."""

import asyncio
import logging
import threading

import pytest

import tokenrelay
from tokenrelay.errors import ERRORS_BY_KIND


def test_request_returns_a_response_with_the_sent_params(fake_bin):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        response = relay.request("post", "/items/{id}", path_params={"id": 1}, json={"a": [1, 2]},
                                 query={"q": "x"}, headers={"X-T": "1"}, environment="staging", timeout=2)
        assert response.status == 200 and response.ok
        assert response.headers["set-cookie"] == ["a=1", "b=2"]
        body = response.json()
        assert body["params"] == {"method": "POST", "path": "/items/{id}", "pathParams": {"id": 1}, "json": {"a": [1, 2]},
                                  "query": {"q": "x"}, "headers": {"X-T": "1"}, "environment": "staging", "timeoutMs": 2000}
        assert body["big"] == 123456789012345678901234567890
        assert response.elapsed == pytest.approx(0.0015)
        assert relay.request(path="/text").text == "héllo"
        assert relay.request(path="/bytes").content == b"\x00\x01\x02\xff"
        assert relay.request(path="/missing").status == 404


def test_invalidate_status_initialize_ping(fake_bin):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        assert relay.initialize()["serverInfo"]["name"] == "tokenrelay"
        relay.ping()
        assert relay.invalidate("staging", "svc") == 1
        assert relay.invalidate(all=True) == 3
        assert relay.status()["sessions"][0]["state"] == "valid"


@pytest.mark.parametrize("kind", sorted(ERRORS_BY_KIND))
def test_each_error_kind_raises_its_class(fake_bin, kind):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        with pytest.raises(ERRORS_BY_KIND[kind]) as info:
            relay.request(path=f"/error/{kind}")
        assert info.value.kind == kind and isinstance(info.value, tokenrelay.RelayError)
        if kind == "auth":
            assert info.value.oauth_error == "invalid_client"
        if kind == "invalid_params":
            assert info.value.diagnostics[0]["pointer"] == "/method"


def test_timeout_error_is_a_builtin_timeout(fake_bin):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        with pytest.raises(TimeoutError):
            relay.request(path="/error/timeout")


def test_client_timeout_sends_cancel_request(fake_bin):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        with pytest.raises(tokenrelay.RelayTimeout):
            relay.call("request", {"path": "/slow"}, timeout=0.2)
        received = relay.call("fake/received")
        slow = [m for m in received if m.get("method") == "request"][0]
        assert {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": slow["id"]}} in received
        relay.ping()  # the late -32800 answer is dropped quietly


def test_concurrent_threads_share_one_process(fake_bin):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        results = {}

        def worker(n):
            results[n] = relay.request(path=f"/n/{n}").json()["params"]["path"]

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results == {n: f"/n/{n}" for n in range(50)}


def test_subscription_yields_events_and_states_then_ends(fake_bin):
    states = []
    with tokenrelay.Relay(binary=fake_bin) as relay:
        with relay.subscribe("/sse/finite", last_event_id="0", on_state=states.append) as sub:
            events = list(sub)
        assert [e.data for e in events[:2]] == ["one", "two\nlines"]
        assert events[0].id == "1" and events[1].event == "tick" and events[1].retry == 1500
        assert '"lastEventId": "0"' in events[2].data
        assert [s.state for s in states] == ["connecting", "open", "closed"]
        assert sub.state.closed and sub.state.status == 204


def test_closing_a_subscription_unsubscribes(fake_bin):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        sub = relay.subscribe("/sse")
        assert sub.get(timeout=10).data == "one"
        sub.close()
        assert list(sub) == []
        received = relay.call("fake/received")
        assert {"jsonrpc": "2.0", "id": received[-2]["id"], "method": "unsubscribe", "params": {"subscription": sub.id}} in received


def test_subscribe_errors_raise(fake_bin):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        with pytest.raises(tokenrelay.UnknownEnvironment):
            relay.subscribe("/error/unknown_environment")


def test_other_notifications_reach_the_callback(fake_bin):
    seen = []
    got = threading.Event()

    def on_notification(method, params):
        seen.append((method, params))
        got.set()

    with tokenrelay.Relay(binary=fake_bin, on_notification=on_notification) as relay:
        relay.call("fake/notify", {"method": "auth-failed", "params": {"kind": "auth", "message": "m"}})
        assert got.wait(10)
    assert seen == [("auth-failed", {"kind": "auth", "message": "m"})]


def test_stderr_goes_to_logging(fake_bin, caplog):
    with caplog.at_level(logging.INFO, logger="tokenrelay.server"):
        with tokenrelay.Relay(binary=fake_bin) as relay:
            relay.ping()
    assert ("tokenrelay.server", logging.WARNING, "tokenrelay warn: this is a fake") in caplog.record_tuples


def test_a_dead_process_fails_pending_and_later_calls(fake_bin):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        sub = relay.subscribe("/sse")
        with pytest.raises(tokenrelay.RelayClosed):
            relay.call("fake/die", timeout=30)
        with pytest.raises(tokenrelay.RelayClosed):
            relay.ping()
        with pytest.raises(tokenrelay.RelayClosed):
            for _ in range(10):
                sub.get(timeout=30)


def test_shutdown_then_requests_are_refused(fake_bin):
    relay = tokenrelay.Relay(binary=fake_bin)
    relay.call("shutdown")
    with pytest.raises(tokenrelay.ShuttingDown):
        relay.ping()
    assert relay.close() == 0  # exit after shutdown


# asyncio -------------------------------------------------------------------------------

def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_async_request_invalidate_status(fake_bin):
    async def main():
        async with tokenrelay.AsyncRelay(binary=fake_bin) as relay:
            responses = await asyncio.gather(*(relay.request("GET", f"/n/{n}") for n in range(50)))
            assert [r.json()["params"]["path"] for r in responses] == [f"/n/{n}" for n in range(50)]
            assert await relay.invalidate(all=True) == 3
            assert (await relay.status())["subscriptions"] == []
            assert (await relay.initialize())["protocolVersion"] == "fake"
    run(main())


@pytest.mark.parametrize("kind", sorted(ERRORS_BY_KIND))
def test_async_each_error_kind_raises_its_class(fake_bin, kind):
    async def main():
        async with tokenrelay.AsyncRelay(binary=fake_bin) as relay:
            with pytest.raises(ERRORS_BY_KIND[kind]):
                await relay.request(path=f"/error/{kind}")
    run(main())


def test_async_task_cancellation_sends_cancel_request(fake_bin):
    async def main():
        async with tokenrelay.AsyncRelay(binary=fake_bin) as relay:
            task = asyncio.ensure_future(relay.request(path="/slow"))
            await relay.ping()  # the slow request is written by now
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            with pytest.raises(tokenrelay.RelayTimeout):
                await relay.call("request", {"path": "/slow"}, timeout=0.2)
            received = await relay.call("fake/received")
            cancels = [m["params"]["id"] for m in received if m.get("method") == "$/cancelRequest"]
            slows = [m["id"] for m in received if m.get("method") == "request"]
            assert cancels == slows and len(slows) == 2
    run(main())


def test_async_subscription(fake_bin):
    async def main():
        async with tokenrelay.AsyncRelay(binary=fake_bin) as relay:
            states = []
            sub = await relay.subscribe("/sse/finite", on_state=states.append)
            events = [e async for e in sub]
            assert [e.data for e in events[:2]] == ["one", "two\nlines"]
            assert [s.state for s in states] == ["connecting", "open", "closed"]
            async with await relay.subscribe("/sse") as open_sub:
                assert (await open_sub.get(timeout=10)).data == "one"
            assert [e async for e in open_sub] == []
    run(main())


def test_async_dead_process_raises_relay_closed(fake_bin):
    async def main():
        async with tokenrelay.AsyncRelay(binary=fake_bin) as relay:
            with pytest.raises(tokenrelay.RelayClosed):
                await relay.call("fake/die", timeout=30)
            with pytest.raises(tokenrelay.RelayClosed):
                await relay.ping()
    run(main())


def test_start_call_cancel_raises_cancelled(fake_bin):
    with tokenrelay.Relay(binary=fake_bin) as relay:
        call = relay.start_call("request", {"path": "/slow"})
        assert not call.done()
        call.cancel()
        with pytest.raises(tokenrelay.Cancelled):
            call.result(timeout=30)


def test_missing_binary_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError):
        tokenrelay.Relay(binary=str(tmp_path / "nope"))


def test_keyboard_interrupt_during_a_sync_wait_sends_cancel_request(fake_bin):
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with tokenrelay.Relay(binary=fake_bin) as relay:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(KeyboardInterrupt):
                relay.request(path="/slow")
            signal.setitimer(signal.ITIMER_REAL, 0)
            received = relay.call("fake/received", timeout=30)
            slow = [m for m in received if m.get("method") == "request"][0]
            assert {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": slow["id"]}} in received
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

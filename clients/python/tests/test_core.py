"""The pure protocol core: params, messages, classification, error mapping, responses."""

import base64
import json
import logging
import os

import pytest

import tokenrelay
from tokenrelay import _core
from tokenrelay.errors import ERRORS_BY_KIND


def test_request_params_follow_the_protocol_names():
    params = _core.request_params(
        "post", "/items/{id}", path_params={"id": 7}, query={"a": 1, "b": (True, "x")},
        headers={"X-A": "1"}, json={"n": 1}, environment="staging", profile="svc", timeout=1.5, auth=False)
    assert params == {"method": "POST", "path": "/items/{id}", "pathParams": {"id": 7},
                      "query": {"a": 1, "b": [True, "x"]}, "headers": {"X-A": "1"}, "json": {"n": 1},
                      "environment": "staging", "profile": "svc", "timeoutMs": 1500, "auth": False}


def test_request_content_is_sent_as_base64_and_defaults_are_omitted():
    params = _core.request_params(url="https://h/x", content=b"\x00\xff")
    assert params == {"method": "GET", "url": "https://h/x", "base64": base64.b64encode(b"\x00\xff").decode()}


@pytest.mark.parametrize("kwargs", [
    {"path": "/a", "json": 1, "text": "a"},
    {"path": "/a", "text": "a", "content": b"b"},
    {"path": "/a", "url": "http://h"},
    {},
])
def test_conflicting_or_missing_request_arguments_are_rejected(kwargs):
    with pytest.raises(ValueError):
        _core.request_params(**kwargs)


def test_timeout_rounds_up_to_whole_milliseconds():
    assert _core.timeout_ms(0.0001) == 1
    assert _core.timeout_ms(2) == 2000
    with pytest.raises(ValueError):
        _core.timeout_ms(0)


def test_subscribe_and_invalidate_params():
    assert _core.subscribe_params("/sse", last_event_id="9", query={"q": "x"}) == {"path": "/sse", "lastEventId": "9", "query": {"q": "x"}}
    assert _core.subscribe_params("/sse", until_closed=True) == {"path": "/sse", "untilClosed": True}
    assert "untilClosed" not in _core.subscribe_params("/sse")
    assert _core.invalidate_params() == {}
    assert _core.invalidate_params("e", "p", all=True) == {"environment": "e", "profile": "p", "all": True}


def test_argv_forces_ndjson_and_passes_options():
    argv = _core.build_argv("/bin/tr", config="c.yaml", env="e", log_level="debug", args=["--log-format", "json"])
    assert argv == ["/bin/tr", "serve", "--framing", "ndjson", "--config", "c.yaml", "--env", "e",
                    "--log-level", "debug", "--log-format", "json"]


def test_binary_is_found_from_argument_environment_or_path(tmp_path):
    exe = tmp_path / "tokenrelay"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert _core.find_binary(str(exe), {}) == str(exe)
    assert _core.find_binary(None, {"TOKENRELAY_BIN": str(exe)}) == str(exe)
    assert _core.find_binary(None, {"PATH": str(tmp_path)}) == str(exe)
    with pytest.raises(FileNotFoundError):
        _core.find_binary(None, {"PATH": str(tmp_path / "none")})


def test_messages_are_single_compact_lines():
    line = _core.encode_message(_core.request_message(1, "ping"))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert json.loads(_core.encode_message(_core.cancel_message(5))) == {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 5}}


def test_classify_sorts_responses_errors_and_notifications():
    shape, key, value = _core.classify({"jsonrpc": "2.0", "id": 3, "result": None})
    assert (shape, key, value.value) == (_core.RESPONSE, 3, None)
    shape, key, value = _core.classify({"jsonrpc": "2.0", "id": 4, "error": {"code": -32021, "message": "t", "data": {"kind": "timeout"}}})
    assert isinstance(value, tokenrelay.RelayTimeout) and isinstance(value, TimeoutError)
    assert _core.classify({"jsonrpc": "2.0", "method": "event", "params": {"data": "x"}}) == (_core.NOTIFICATION, "event", {"data": "x"})
    with pytest.raises(tokenrelay.ProtocolError):
        _core.classify({"jsonrpc": "2.0"})
    assert len(_core.parse_line(b'[{"id":1,"result":1},{"id":2,"result":2}]\n')) == 2
    with pytest.raises(tokenrelay.ProtocolError):
        _core.parse_line(b"nope\n")


@pytest.mark.parametrize("kind,cls", sorted(ERRORS_BY_KIND.items()))
def test_every_kind_maps_to_its_class(kind, cls):
    error = tokenrelay.error_from_json({"code": -32000, "message": "m", "data": {"kind": kind}})
    assert type(error) is cls and error.kind == kind and error.code == -32000 and error.message == "m"


def test_every_kind_in_the_openrpc_document_has_a_class():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "schemas", "openrpc.json")
    if not os.path.exists(path):
        pytest.skip("schemas/openrpc.json not found")
    with open(path) as f:
        kinds = {e["data"]["kind"] for e in json.load(f)["components"]["errors"].values()}
    assert kinds <= set(ERRORS_BY_KIND)


def test_errors_fall_back_to_the_code_then_the_base_class():
    assert type(tokenrelay.error_from_json({"code": -32010, "message": "m"})) is tokenrelay.AuthError
    unknown = tokenrelay.error_from_json({"code": -32099, "message": "m", "data": {"kind": "new_kind"}})
    assert type(unknown) is tokenrelay.RelayError and unknown.kind == "new_kind"
    assert isinstance(tokenrelay.error_from_json("junk"), tokenrelay.ProtocolError)


def test_auth_and_invalid_params_expose_their_data():
    auth = tokenrelay.error_from_json({"code": -32010, "message": "m", "data": {"kind": "auth", "oauthError": "invalid_grant", "oauthErrorDescription": "d"}})
    assert (auth.oauth_error, auth.oauth_error_description) == ("invalid_grant", "d")
    bad = tokenrelay.error_from_json({"code": -32602, "message": "m", "data": {"kind": "invalid_params", "diagnostics": [{"pointer": "/a", "reason": "r"}]}})
    assert bad.diagnostics == [{"pointer": "/a", "reason": "r"}]


def test_response_bodies():
    r = tokenrelay.Response({"status": 200, "headers": {"a": "b"}, "json": {"n": 12345678901234567890123}, "elapsedMs": 250})
    assert r.ok and r.json() == {"n": 12345678901234567890123} and r.elapsed == 0.25
    assert json.loads(r.text) == {"n": 12345678901234567890123}
    t = tokenrelay.Response({"status": 500, "headers": {}, "text": "[1]", "elapsedMs": 1})
    assert not t.ok and t.text == "[1]" and t.content == b"[1]" and t.json() == [1]
    b = tokenrelay.Response({"status": 200, "headers": {}, "base64": "AAEC", "elapsedMs": 1})
    assert b.content == b"\x00\x01\x02"
    assert tokenrelay.Response({"status": 204, "headers": {}, "elapsedMs": 1}).content == b""
    with pytest.raises(tokenrelay.ProtocolError):
        tokenrelay.Response({"headers": {}})


def test_events_and_states_from_notifications():
    assert tokenrelay.Event.from_params({"subscription": "s", "data": "x"}) == tokenrelay.Event(data="x", event="message")
    state = tokenrelay.SubscriptionState.from_params({"subscription": "s", "state": "reconnecting", "attempt": 2, "retryInMs": 500, "error": {"kind": "transport", "message": "m"}})
    assert (state.state, state.attempt, state.retry_in_ms, state.error["kind"]) == ("reconnecting", 2, 500, "transport")


def test_server_log_lines_keep_their_level(caplog):
    with caplog.at_level(logging.DEBUG, logger="tokenrelay.server"):
        _core.forward_log_line(b"tokenrelay warn: careful\n")
        _core.forward_log_line(b'{"level":"error","message":"bad"}\n')
        _core.forward_log_line(b"plain\n")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "tokenrelay warn: careful"), (logging.ERROR, '{"level":"error","message":"bad"}'), (logging.INFO, "plain")]


def test_error_codes_are_the_documented_ones():
    """errors.py's code table is exactly schemas/openrpc.json's (the renumbering of protocol
    2026-12-01 included: config -32004, unknown_environment -32005)."""
    import json
    from pathlib import Path

    from tokenrelay.errors import _KIND_BY_CODE

    document = json.loads((Path(__file__).resolve().parents[3] / "schemas" / "openrpc.json").read_text())
    documented = {e["code"]: kind for kind, e in document["components"]["errors"].items()}
    assert documented == _KIND_BY_CODE
    assert not {-32001, -32002, -32803, -32802, -32801} & set(_KIND_BY_CODE), "codes LSP reserves"

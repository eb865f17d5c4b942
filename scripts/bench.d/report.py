#!/usr/bin/env python3
"""Turns scripts/bench's raw results (JSON lines {"name", "run", "data"} or, for a measurement
that failed, {"name", "run", "error"}) into the table, the targets (each with its ratio and
met / NO / ERROR) and a JSON file of medians.

  report.py RESULTS.jsonl OUT.json [--meta JSON] [--check]

Exit status: 1 when a measurement failed (an ERROR row) or, with --check, when a target is
missed; else 0.
"""
import json
import statistics
import sys


def medians(entries):
    """Median of every numeric field (and of every cpu_pct member) across runs; other values
    (flags, texts, lists) as the first run gave them."""
    numbers, members, kept = {}, {}, {}
    for data in entries:
        for key, value in data.items():
            if isinstance(value, bool) or key == "first_error" or not isinstance(value, (int, float, dict)):
                if value is not None:
                    kept.setdefault(key, value)
            elif isinstance(value, dict):
                for sub, number in value.items():
                    if isinstance(number, (int, float)):
                        members.setdefault(key, {}).setdefault(sub, []).append(number)
            else:
                numbers.setdefault(key, []).append(value)
    result = dict(kept)
    result.update({key: round(statistics.median(v), 2) for key, v in numbers.items()})
    result.update({key: {sub: round(statistics.median(v), 1) for sub, v in subs.items()} for key, subs in members.items()})
    result["runs"] = len(entries)
    return result


def main():
    raw, out = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    check = "--check" in rest
    meta = json.loads(rest[rest.index("--meta") + 1]) if "--meta" in rest else {}
    runs, failed = {}, {}
    with open(raw) as handle:
        for line in handle:
            if line.strip():
                entry = json.loads(line)
                if "error" in entry:
                    failed.setdefault(entry["name"], []).append(f"run {entry['run']}: {entry['error']}")
                else:
                    runs.setdefault(entry["name"], []).append(entry["data"])
    m = {name: medians(entries) for name, entries in runs.items()}

    def get(name, key):
        value = m.get(name, {}).get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    # httpx at its best concurrency (throughput), and at one in flight (latency: the faster client).
    httpx_names = [n for n in m if n.startswith("httpx_")]
    best_httpx = max(httpx_names, key=lambda n: get(n, "throughput") or 0, default=None)
    httpx_one = min((n for n in httpx_names if get(n, "inflight") == 1),
                    key=lambda n: get(n, "p50_us") or 1e18, default=None)
    authlib_names = [n for n in m if n.startswith("authlib_")]
    best_authlib = max(authlib_names, key=lambda n: get(n, "throughput") or 0, default=None)

    rows = [
        ("wrk (ceiling: C, no TLS, no JSON)", "wrk_64"), ("wrk", "wrk_1"),
        ("libcurl multi, direct (Swift, one thread)", "curl_64"), ("libcurl multi, direct", "curl_1"),
        ("URLSession (FoundationNetworking)", "urlsession_64"), ("URLSession", "urlsession_1"),
        (f"Python httpx, best concurrency ({best_httpx})", best_httpx),
        (f"Python httpx ({httpx_one})", httpx_one if httpx_one != best_httpx else None),
        (f"Python httpx + Authlib, best ({best_authlib})", best_authlib),
        ("tokenrelay Python client (AsyncRelay)", "pyclient"), ("tokenrelay Python client", "pyclient_1"),
        ("tokenrelay `request` (bearer, NDJSON)", "relay_64"), ("tokenrelay `request`", "relay_1"),
        ("tokenrelay mcp `tools/call` http_request", "mcp_64"), ("tokenrelay mcp `tools/call`", "mcp_1"),
        ("tokenrelay `request`, stdio on socket pairs (libuv: Neovim, Node)", "relay_1_socket"),
        ("libcurl multi, direct, all on one core", "curl_1_core"), ("tokenrelay `request`, all on one core", "relay_1_core"),
        ("libcurl multi, direct, nginx on the other core", "curl_1_cross"),
        ("tokenrelay `request`, nginx on the other core", "relay_1_cross"),
        ("tokenrelay `ping` (protocol only)", "ping_64"), ("tokenrelay `ping`", "ping_1"),
        ("driver ceiling: /bin/cat echo", "echo_64"), ("driver ceiling: /bin/cat echo", "echo_1"),
    ]
    lines = ["| client | in flight | req/s | p50 µs | p99 µs | CPU % of one core |", "|---|---:|---:|---:|---:|---|"]
    for label, name in rows:
        if name in failed:
            lines.append(f"| {label} ({name}) | ERROR | | | | {'; '.join(failed[name])} |")
            continue
        if not name or name not in m:
            continue
        cpu = m[name].get("cpu_pct") or {}
        cpu_text = ", ".join(f"{k} {v:g}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))
        inflight = get(name, "inflight")
        lines.append(
            f"| {label} | {int(inflight) if inflight else '?'} | {get(name, 'throughput') or 0:,.0f} | "
            f"{get(name, 'p50_us') or 0:,.0f} | {get(name, 'p99_us') or 0:,.0f} | {cpu_text} |")

    def ratio(a, b):
        return round(a / b, 3) if a is not None and b else None

    targets = []

    def target(label, value, goal, ok, detail="", needs=()):
        """One target; `needs` names the measurements it is computed from, so a failed one makes
        it an ERROR instead of a silent n/a. `ok` None: a figure shown for reference, no goal."""
        errors = [f"{n}: {e}" for n in needs if n in failed for e in failed[n]]
        missing = [n for n in needs if n not in m and n not in failed]
        if errors:
            met, detail = "ERROR", "; ".join(errors)
        elif value is None:
            met = "n/a"
            detail = "not measured: " + ", ".join(missing) if missing else (detail or "not available")
        else:
            met = "info" if ok is None else "yes" if ok(value) else "NO"
        targets.append({"target": label, "value": value, "goal": goal, "met": met, "detail": detail})

    target("mcp tools/call p50@1 - request p50@1 (µs, per-call overhead)",
           None if get("mcp_1", "p50_us") is None or get("relay_1", "p50_us") is None
           else round(get("mcp_1", "p50_us") - get("relay_1", "p50_us"), 1), "info", None,
           f"tools/call@64 {get('mcp_64', 'throughput') or 0:,.0f} req/s vs request@64 {get('relay_64', 'throughput') or 0:,.0f}",
           needs=("mcp_1", "relay_1"))
    target("mcp-proxy tools/call p50@1 / direct tools/call p50@1 (same local MCP server)",
           get("mcp_proxy", "p50_ratio"), "info", None,
           f"{get('mcp_proxy', 'proxy_p50_ms')} ms vs {get('mcp_proxy', 'direct_p50_ms')} ms; @16 "
           f"{get('mcp_proxy', 'proxy_rps') or 0:,.0f} req/s vs {get('mcp_proxy', 'direct_rps') or 0:,.0f}",
           needs=("mcp_proxy",))
    target("exec endpoint p50@1 / nginx proxy_pass p50@1 (fixed header, same upstream)",
           get("exec_proxy", "p50_ratio"), "<= 1.5", lambda v: v <= 1.5,
           f"{get('exec_proxy', 'exec_p50_us')} µs vs {get('exec_proxy', 'nginx_p50_us')} µs",
           needs=("exec_proxy",))
    target("exec endpoint@64 / nginx proxy_pass@64 (req/s)", get("exec_proxy", "rps_ratio"), ">= 0.5",
           lambda v: v >= 0.5,
           f"{get('exec_proxy', 'exec_rps') or 0:,.0f} req/s vs {get('exec_proxy', 'nginx_rps') or 0:,.0f}",
           needs=("exec_proxy",))
    target("request@64 / wrk@64 (req/s)", ratio(get("relay_64", "throughput"), get("wrk_64", "throughput")),
           ">= 0.3", lambda v: v >= 0.3, needs=("relay_64", "wrk_64"))
    target("request@64 / libcurl@64 (req/s)", ratio(get("relay_64", "throughput"), get("curl_64", "throughput")),
           ">= 0.6", lambda v: v >= 0.6, needs=("relay_64", "curl_64"))
    target("request p50@1 / libcurl p50@1", ratio(get("relay_1", "p50_us"), get("curl_1", "p50_us")), "<= 2",
           lambda v: v <= 2, f"{get('relay_1', 'p50_us')} µs vs {get('curl_1', 'p50_us')} µs; "
           f"`ping` {get('ping_1', 'p50_us')} µs, /bin/cat echo {get('echo_1', 'p50_us')} µs", needs=("relay_1", "curl_1"))
    for placement, what in (("core", "all on one core: CPU only"), ("cross", "nginx on the other core: hops cross alike")):
        relay, curl = f"relay_1_{placement}", f"curl_1_{placement}"
        if relay in m or relay in failed:
            target(f"request p50@1 / libcurl p50@1, {what}", ratio(get(relay, "p50_us"), get(curl, "p50_us")),
                   "(reference)", None, f"{get(relay, 'p50_us')} µs vs {get(curl, 'p50_us')} µs", needs=(relay, curl))
    py = m.get("pyclient", {})
    target("Python client@64 / httpx+authlib best (req/s)",
           ratio(get("pyclient", "throughput"), get(best_authlib, "throughput") if best_authlib else None), ">= 5",
           lambda v: v >= 5, "" if py.get("available", True) else py.get("reason", "not available"),
           needs=("pyclient",) + ((best_authlib,) if best_authlib else ()))
    target("Python client p50@1 / httpx p50@1", ratio(get("pyclient_1", "p50_us"), get(httpx_one, "p50_us")),
           "<= 1", lambda v: v <= 1, f"{get('pyclient_1', 'p50_us')} µs vs {get(httpx_one, 'p50_us')} µs ({httpx_one})",
           needs=("pyclient_1",) + ((httpx_one,) if httpx_one else ("httpx_sync_1",)))
    target("cold start tokenrelay / bare Foundation", get("coldstart", "ratio"), "<= 1.2", lambda v: v <= 1.2,
           f"{get('coldstart', 'tokenrelay_ms')} ms vs {get('coldstart', 'bare_ms')} ms (medians)", needs=("coldstart",))
    target("cold start tokenrelay / bare FoundationEssentials (its own start-up)",
           get("coldstart_essentials", "ratio"), "(reference)", None,
           f"{get('coldstart_essentials', 'tokenrelay_ms')} ms vs {get('coldstart_essentials', 'bare_ms')} ms (medians)",
           needs=("coldstart_essentials",))
    extra = m.get("coldstart_essentials", {}).get("extra_libraries")
    lazy = ("libcurl", "libcrypto", "libssl", "libsqlite3", "libicu", "lib_FoundationICU", "libFoundation.so",
            "libFoundationInternationalization", "libFoundationNetworking")
    target("cold start: libraries mapped beyond a bare FoundationEssentials binary's", None if extra is None else len(extra),
           "none of " + "/".join(lazy), lambda v: not any(x.startswith(lazy) for x in extra),
           ", ".join(extra) if extra else ("nothing extra" if extra is not None else ""),
           needs=("coldstart_essentials",))
    target("`tokenrelay call` / curl CLI per call, static token", get("call_static", "call_vs_curl"), "<= 1.5",
           lambda v: v <= 1.5, f"{get('call_static', 'call_ms')} ms vs {get('call_static', 'curl_ms')} ms",
           needs=("call_static",))
    issued = sum(entry.get("issued", 0) for entry in runs.get("call_tokens", []))
    target("`tokenrelay call` / curl CLI per call, stored token", get("call_static", "stored_vs_curl"), "<= 1.5",
           lambda v: v <= 1.5 and issued <= 1,
           ("" if issued <= 1 else "the store did not keep the token: ") +
           f"{get('call_static', 'stored_ms')} ms vs {get('call_static', 'curl_ms')} ms (static-token call "
           f"{get('call_static', 'call_ms')} ms); {issued} token(s) issued for the stored calls; the session-store "
           f"step, against its own resource server: {get('store', 'call_ms')} ms vs {get('store', 'curl_ms')} ms",
           needs=("call_static",))
    calls, ok = get("storm", "token_calls"), get("storm", "succeeded")
    target("storm: token calls", calls, "== 1", lambda v: v == 1,
           f"{ok} of {get('storm', 'requests')} succeeded in {get('storm', 'wall_s')} s", needs=("storm_raw",))
    target("storm: successes", ok, "== 1000", lambda v: v == 1000, needs=("storm_raw",))
    subs = m.get("subscribe", {})
    hwm = get("subscribe", "subs_hwm_kb")
    target("1,000 subscriptions: peak RSS MB", round(hwm / 1024, 1) if hwm else None, "<= 64", lambda v: v <= 64,
           (f"{get('subscribe', 'events_per_s')} events/s delivered, {get('subscribe', 'errors')} errors"
            if subs.get("available", False) else subs.get("reason", "")), needs=("subscribe",))
    warm, after = get("rss", "warm_rss_kb"), get("rss", "after_rss_kb")
    target("RSS growth over the long run", ratio(after - warm, warm) if warm and after else None, "<= 0.10",
           lambda v: v <= 0.10,
           f"idle {get('rss', 'idle_rss_kb')} kB, after warm-up {warm} kB, after {get('rss', 'requests')} requests "
           f"{after} kB (peak {get('rss', 'after_hwm_kb')} kB)", needs=("rss",))
    target("store: token calls per renewal period, 4 processes", get("store", "load_token_calls_per_renewal_period"),
           "~1 (not 4)", lambda v: v <= 1.5,
           f"{get('store', 'load_token_calls')} token calls in {get('store', 'load_wall_s')} s, "
           f"{get('store', 'load_ok')} of {get('store', 'load_requests')} requests answered 200", needs=("store",))
    target("fleet: tokens per renewal period, 3 hosts sharing a PostgreSQL tier",
           get("fleet", "fleet_tokens_per_period"), "~1 (not 3)", lambda v: v <= 1.5,
           f"{get('fleet', 'fleet_tokens')} tokens in {get('fleet', 'fleet_wall_s')} s of "
           f"{get('fleet', 'ttl_s')} s tokens, {get('fleet', 'fleet_ok')} of {get('fleet', 'fleet_sent')} requests "
           f"answered 200; alone: {get('fleet', 'alone_tokens')} tokens "
           f"({get('fleet', 'alone_tokens_per_period')} per period)", needs=("fleet",))
    few, many = get("redactor_10", "clean_line_ns"), get("redactor_10000", "clean_line_ns")
    target("redactor: ns per log line, 10,000 / 10 tokens", ratio(many, few), "<= 1.5", lambda v: v <= 1.5,
           f"{few} ns vs {many} ns per {get('redactor_10', 'line_bytes')}-byte line; a line with a token: "
           f"{get('redactor_10', 'secret_line_ns')} vs {get('redactor_10000', 'secret_line_ns')} ns",
           needs=("redactor_10", "redactor_10000"))

    lines += ["", "| target | value | goal | met | detail |", "|---|---:|---|---|---|"]
    for t in targets:
        lines.append(f"| {t['target']} | {t['value']} | {t['goal']} | {t['met']} | {t['detail']} |")
    print("\n".join(lines))
    with open(out, "w") as handle:
        json.dump({"meta": meta, "medians": m, "failed": failed, "targets": targets}, handle, indent=2, sort_keys=True)
        handle.write("\n")
    print(f"\nmedians written to {out}")
    missed = [t["target"] for t in targets if t["met"] == "NO"]
    if failed:
        print(f"scripts/bench: {len(failed)} measurement(s) FAILED: {', '.join(sorted(failed))}", file=sys.stderr)
    if check and missed:
        print(f"scripts/bench --check: {len(missed)} target(s) missed: {'; '.join(missed)}", file=sys.stderr)
    return 1 if failed or (check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())

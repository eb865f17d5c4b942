import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// TokenRelayBench: the load driver of scripts/bench and its references. Every mode prints one
// JSON object on stdout. Modes:
//   rpc        --command "BIN ARGS" [--body JSON-TAIL] --inflight N --total M [--warmup W]
//              [--expect BYTES] [--watch name=pid,...] [--name tokenrelay] [--stderr FILE] [--no-ping]
//              [--stdio pipe|socket]   (socket: the child's stdin/stdout on socket pairs, as libuv spawns)
//   curl       --url URL --inflight N --total M [--header 'K: V'] [--watch ...]   (libcurl multi)
//   urlsession --url URL --inflight N --total M [--header 'K: V'] [--watch ...]   (URLSession)
//   coldstart  --command "BIN ARGS" --bare "BIN [ARGS]" [--runs K]
//   storm      --command "BIN ARGS" --body JSON-TAIL --count 1000 --wait S [--expect BYTES]
//   subscribe  --command "BIN ARGS" --body JSON-TAIL --count 1000 [--settle S] [--measure S]
//   redactor   --tokens N [--lines L]          (cost of redacting one log line with N tokens)
// JSON-TAIL is what follows the id in a request, e.g. "method":"request","params":{...}.

signal(SIGPIPE, SIG_IGN)
let arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first else {
    die("usage: TokenRelayBench rpc|curl|urlsession|coldstart|storm|subscribe|redactor --help")
}
let options = Options(Array(arguments.dropFirst()))

/// The argv of `--command` (or of another option naming a command; words separated by spaces).
func commandWords(_ option: String = "command") -> [String] {
    options.string(option).split(separator: " ").map(String.init)
}

/// Memory of `pid` as JSON fields with `prefix`.
func memoryFields(_ pid: Int32, _ prefix: String) -> [String: Any] {
    let memory = ProcStats.memoryKiB(pid)
    return ["\(prefix)_rss_kb": memory.rss, "\(prefix)_hwm_kb": memory.hwm]
}

switch mode {
case "rpc":
    guard let stdio = ChildProcess.Stdio(rawValue: options.string("stdio", "pipe")) else { die("--stdio pipe|socket") }
    let child = ChildProcess.spawn(commandWords(), stderrPath: options.optional("stderr"), stdio: stdio)
    let connection = RPCConnection(child: child)
    let inflight = options.int("inflight", 1)
    let total = options.int("total", 10_000)
    let warmup = options.int("warmup", 0)
    let body = options.string("body", #""method":"ping""#)
    let expect = options.optional("expect")
    var output: [String: Any] = ["inflight": inflight]
    if !options.flag("no-ping") {
        let ping = connection.run(body: #""method":"ping""#, total: 1, inflight: 1)
        output["first_ping_us"] = rounded(Double(ping.latencies.first ?? 0) / 1000, 1)
        usleep(200_000)
        output.merge(memoryFields(child.pid, "idle")) { $1 }
    }
    if warmup > 0 {
        let warm = connection.run(body: body, total: warmup, inflight: inflight, expect: expect)
        output["warmup_errors"] = warm.errors
        output.merge(memoryFields(child.pid, "warm")) { $1 }
    }
    let name = options.string("name", "child")
    let split = CPUSplit([("driver", getpid()), (name, child.pid)] + watchedPids(options.optional("watch")))
    let result = connection.run(body: body, total: total, inflight: inflight, expect: expect)
    output["cpu_pct"] = split.percentages()
    output.merge(memoryFields(child.pid, "after")) { $1 }
    output.merge(result.fields()) { $1 }
    if let error = connection.firstError { output["first_error"] = String(error.prefix(400)) }
    child.stop()
    printJSON(output)

case "curl", "urlsession":
    let url = options.string("url")
    let inflight = options.int("inflight", 1)
    let total = options.int("total", 10_000)
    let header = options.optional("header")
    let split = CPUSplit([("driver", getpid())] + watchedPids(options.optional("watch")))
    let result: LoadResult
    if mode == "curl" {
        result = CurlMultiLoad.run(url: url, inflight: inflight, total: total, header: header)
    } else {
        let pair = header.flatMap { text -> (String, String)? in
            guard let colon = text.firstIndex(of: ":") else { return nil }
            return (String(text[..<colon]), text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        result = await URLSessionLoad.run(url: url, inflight: inflight, total: total, header: pair)
    }
    var output = result.fields()
    output["inflight"] = inflight
    output["cpu_pct"] = split.percentages()
    printJSON(output)

case "coldstart":
    let relay = commandWords()
    // --bare may carry arguments too: a second tokenrelay build or config, for an A/B of two
    // starts (it is sent a line that is not JSON-RPC; any answer line ends its timing).
    let bare = commandWords("bare")
    let runs = options.int("runs", 30)
    var relayTimes: [UInt64] = []
    var bareTimes: [UInt64] = []
    let ping = #"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
    var relayLibraries: [String] = []
    var bareLibraries: [String] = []
    for run in 0..<runs {
        // Alternate which one goes first, so drift on a shared machine hits both alike. The
        // libraries are read once, after the timed runs' first answer (not timed either way).
        let last = run == runs - 1
        if run % 2 == 0 {
            let relayRun = ColdStart.firstAnswer(relay, line: ping, libraries: last)
            let bareRun = ColdStart.firstAnswer(bare, line: "hello", libraries: last)
            relayTimes.append(relayRun.nanos)
            bareTimes.append(bareRun.nanos)
            if last { (relayLibraries, bareLibraries) = (relayRun.libraries, bareRun.libraries) }
        } else {
            let bareRun = ColdStart.firstAnswer(bare, line: "hello", libraries: last)
            let relayRun = ColdStart.firstAnswer(relay, line: ping, libraries: last)
            bareTimes.append(bareRun.nanos)
            relayTimes.append(relayRun.nanos)
            if last { (relayLibraries, bareLibraries) = (relayRun.libraries, bareRun.libraries) }
        }
    }
    let relayMedian = ColdStart.median(relayTimes)
    let bareMedian = ColdStart.median(bareTimes)
    let bareSet = Set(bareLibraries)
    printJSON([
        "runs": runs,
        "tokenrelay_ms": rounded(relayMedian / 1e6, 2),
        "bare_ms": rounded(bareMedian / 1e6, 2),
        "tokenrelay_min_ms": rounded(Double(relayTimes.min() ?? 0) / 1e6, 2),
        "bare_min_ms": rounded(Double(bareTimes.min() ?? 0) / 1e6, 2),
        "ratio": rounded(bareMedian > 0 ? relayMedian / bareMedian : 0, 3),
        "tokenrelay_libraries": relayLibraries.count,
        "bare_libraries": bareLibraries.count,
        // What tokenrelay maps at start beyond the bare Foundation binary: a library appearing
        // here (libcurl, libcrypto, libsqlite3, ICU data...) is a start-up regression to look at.
        "extra_libraries": relayLibraries.filter { !bareSet.contains($0) },
    ])

case "storm":
    let child = ChildProcess.spawn(commandWords(), stderrPath: options.optional("stderr"))
    let connection = RPCConnection(child: child)
    let body = options.string("body")
    let expect = options.optional("expect")
    let count = options.int("count", 1000)
    let warm = connection.run(body: body, total: 1, inflight: 1, expect: expect)
    let wait = options.double("wait", 0)
    if wait > 0 { usleep(UInt32(wait * 1e6)) }
    let storm = connection.run(body: body, total: count, inflight: count, expect: expect)
    var output = storm.fields()
    output["warmup_errors"] = warm.errors
    output["succeeded"] = storm.completed - storm.errors
    if let error = connection.firstError { output["first_error"] = String(error.prefix(400)) }
    output.merge(memoryFields(child.pid, "after")) { $1 }
    child.stop()
    printJSON(output)

case "redactor":
    printJSON(RedactorBench.run(tokens: options.int("tokens", 10), lines: options.int("lines", 200_000)))
case "subscribe":
    let child = ChildProcess.spawn(commandWords(), stderrPath: options.optional("stderr"))
    let connection = RPCConnection(child: child)
    let body = options.string("body")
    let count = options.int("count", 1000)
    let first = connection.run(body: body, total: 1, inflight: 1)
    if first.errors > 0 {
        let error = connection.firstError ?? ""
        child.kill9()
        let missing = error.contains("-32601")
        printJSON(["available": false, "reason": missing ? "subscribe: method_not_found" : String(error.prefix(400))])
        exit(0)
    }
    let rest = connection.run(body: body, total: count - 1, inflight: count)
    _ = connection.countEvents(for: options.double("settle", 3))
    let measure = options.double("measure", 5)
    let seen = connection.countEvents(for: measure)
    var output: [String: Any] = [
        "available": true, "subscriptions": count, "errors": rest.errors,
        "events_per_s": rounded(Double(seen.events) / measure, 1),
        "notifications_per_s": rounded(Double(seen.notifications) / measure, 1),
        "subscribe_wall_s": rounded(Double(rest.wallNanos) / 1e9, 3),
    ]
    if let error = connection.firstError { output["first_error"] = String(error.prefix(400)) }
    output.merge(memoryFields(child.pid, "subs")) { $1 }
    child.kill9()
    printJSON(output)

default:
    die("unknown mode \(mode)")
}

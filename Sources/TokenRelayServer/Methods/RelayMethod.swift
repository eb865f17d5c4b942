import TokenRelayJSONRPC

/// A method or notification the OpenRPC document describes: its wire name and its description,
/// kept in the file of its implementation.
protocol DescribedMethod: SendableMetatype {
    /// The JSON-RPC method name.
    static var method: String { get }
    /// Its entry in `schemas/openrpc.json` and `rpc.discover`.
    static var openRPC: MethodDescription { get }
    /// A request method's dispatcher handler for a server; `nil` for a notification. (A protocol
    /// requirement rather than an `as? any RelayMethod.Type` cast: a cast is a conformance
    /// lookup that scans every loaded image at start.)
    static var requestHandler: (@Sendable (RelayServer) -> MethodHandler)? { get }
    /// Where its requests run (``MethodPlacement``): where own tasks run unless it says otherwise.
    static var place: MethodPlacement.Place { get }
}

extension DescribedMethod {
    static var requestHandler: (@Sendable (RelayServer) -> MethodHandler)? { nil }
    static var place: MethodPlacement.Place { .ownTasks }
}

/// A request method: typed params decoded with JSON-Pointer diagnostics, a handler, a result.
/// ``MethodCatalog/requests`` lists every one; the dispatcher's table is built from that list.
protocol RelayMethod: DescribedMethod {
    associatedtype Params: Sendable
    associatedtype Result: MethodResult
    /// Decodes the params; every problem is a -32602 with `data.diagnostics`.
    static func decode(_ params: JSONValue?, context: RequestContext) throws -> Params
    /// Runs the method.
    static func handle(_ params: Params, in context: MethodContext) async throws -> Result
}

/// Params that decode themselves from a request's `params`.
protocol MethodParams: Sendable {
    init(decoding params: JSONValue?) throws(RPCError)
}

/// A method's result as it goes on the wire: written into the answer by ``write(into:)``, which
/// by default writes ``resultValue``. A result on the hot path (`request`'s) writes its text
/// itself, without the tree; its ``resultValue`` stays the value that text parses to (tested).
protocol MethodResult: JSONWritable {
    var resultValue: JSONValue { get }
}

extension MethodResult {
    package func write(into output: inout [UInt8]) { resultValue.write(into: &output) }
}

extension JSONValue: MethodResult {
    var resultValue: JSONValue { self }
}

extension RelayMethod where Params: MethodParams {
    static func decode(_ params: JSONValue?, context: RequestContext) throws -> Params {
        try Params(decoding: params)
    }
}

extension RelayMethod {
    static var requestHandler: (@Sendable (RelayServer) -> MethodHandler)? { { handler(server: $0) } }

    /// The dispatcher's handler: decode, then run.
    static func handler(server: RelayServer) -> MethodHandler {
        { params, request in
            let decoded = try decode(params, context: request)
            return try await handle(decoded, in: MethodContext(server: server, request: request))
        }
    }
}

/// No params: absent, `null`, `{}` or `[]` (SPEC §4.2).
struct NoParams: MethodParams {
    init(decoding params: JSONValue?) throws(RPCError) {
        try ParamReader.expectNone(params)
    }
}

/// `{environment?, profile?}`: the session a method is about (`login`), or the sessions it
/// follows (`watch-sessions`).
struct SessionParams: MethodParams {
    var environment: String?
    var profile: String?

    init(decoding params: JSONValue?) throws(RPCError) {
        var reader = try ParamReader(params, allowed: ["environment", "profile"])
        environment = reader.string("environment")
        profile = reader.string("profile")
        try reader.finish()
    }
}

/// What a method's handler may use: the server (its runtimes, subscriptions, reload) and the
/// request being answered.
struct MethodContext: Sendable {
    let server: RelayServer
    let request: RequestContext

    /// Runs `body` on the current runtime, kept to its end (a reload waits for it).
    func withRuntime<Value>(_ body: (RelayRuntime) async throws -> Value) async throws -> Value {
        try await server.runtimes.use(body)
    }

    /// The token methods of `runtime`.
    func tokens(_ runtime: RelayRuntime) -> TokenMethods {
        let subscriptions = server.subscriptions
        return TokenMethods(runtime: runtime, subscriptionCount: { subscriptions.count })
    }
}

/// Every method and notification, in the order the OpenRPC document lists them.
enum MethodCatalog {
    /// Everything documented: requests, the notifications a client sends, those the server sends.
    static let documented: [any DescribedMethod.Type] = [
        InitializeMethod.self, ShutdownMethod.self, ExitNotification.self, InitializedNotification.self,
        MCPInitializedNotification.self, CancelRequestNotification.self, MCPCancelledNotification.self,
        PingMethod.self, DiscoverMethod.self, RequestMethod.self, TokenInvalidateMethod.self, LogoutMethod.self,
        StatusMethod.self, TokenGetMethod.self, LoginMethod.self, LoginCompleteMethod.self, ConfigReloadMethod.self,
        SubscribeMethod.self,
        UnsubscribeMethod.self, WatchSessionsMethod.self, UnwatchSessionsMethod.self, EventNotification.self,
        SubscriptionStateNotification.self, AuthPromptNotification.self, AuthFailedNotification.self,
        SessionChangedNotification.self, LogNotification.self,
    ]

    /// The request methods the dispatcher serves (`test/wait` is added only for tests).
    static let requests: [any DescribedMethod.Type] = documented.filter { $0.requestHandler != nil }
}

import TokenRelayJSONRPC
import TokenRelayLogging

extension RelayServer {
    /// Every request method by name: the types of ``MethodCatalog/requests`` (and `test/wait`
    /// in test builds).
    func methodTable() -> [String: MethodHandler] {
        var methods = MethodCatalog.requests
        if options.testMethods { methods.append(TestWaitMethod.self) }
        let handlers = methods.compactMap { method in method.requestHandler.map { (method.method, $0(self)) } }
        return Dictionary(uniqueKeysWithValues: handlers)
    }

    /// Where each request method runs, as its type says.
    static func methodPlaces() -> [String: MethodPlacement.Place] {
        Dictionary(uniqueKeysWithValues: MethodCatalog.requests.map { ($0.method, $0.place) })
    }

    /// Every notification the server acts on by name (`$/cancelRequest` and
    /// `notifications/cancelled` are handled by the dispatcher; `exit` by
    /// ``readOrderNotificationTable()``).
    func notificationTable() -> [String: MethodHandler] {
        [
            InitializedNotification.method: { _, _ in JSONValue.null },
            MCPInitializedNotification.method: { _, _ in JSONValue.null },
        ]
    }

    /// Notifications acted on at once by the stdin reader, in read order. `exit` is one: its
    /// exit code (0 after `shutdown`, 1 without) is decided before the next message or the end
    /// of input is seen, so an EOF right behind it cannot win the race and make it 0.
    func readOrderNotificationTable() -> [String: @Sendable (RequestContext) -> Void] {
        [
            ExitNotification.method: { [termination] context in
                termination.trigger(.exitNotification(afterShutdown: context.afterShutdown))
            }
        ]
    }
}

import Foundation
import Testing

@testable import TokenRelayJSONRPC
@testable import TokenRelayServer

/// schemas/openrpc.json is the document the method types describe (not stale), `rpc.discover`
/// serves it, and it covers the dispatcher's table and every error code.
@Suite struct OpenRPCAgreementTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func document() throws -> JSONValue {
        let data = try Data(contentsOf: repositoryRoot.appendingPathComponent("schemas/openrpc.json"))
        return try JSONParser.parse(Array(data))
    }

    /// A sink that drops what it is given.
    final class DiscardingSink: MessageSink {
        func send(_ message: [UInt8]) async {}
        func sendNow(_ message: [UInt8]) {}
    }

    @Test func checkedInSchemaIsNotStale() throws {
        let data = try Data(contentsOf: Self.repositoryRoot.appendingPathComponent("schemas/openrpc.json"))
        #expect(
            OpenRPCDocument.text == String(decoding: data, as: UTF8.self),
            "schemas/openrpc.json is stale: run scripts/gen-openrpc")
    }

    @Test func discoverServesTheGeneratedDocument() async throws {
        let server = try await RelayServer.make(options: ServerOptions(), settings: .empty)
        let discover = try #require(server.methodTable()["rpc.discover"])
        let context = RequestContext(id: .number(JSONNumber(1)), inBatch: false, sink: DiscardingSink())
        let served = try await discover(nil, context).serialized()
        #expect(try JSONParser.parse(served) == (try JSONParser.parse(Array(OpenRPCDocument.text.utf8))))
    }

    @Test func everyDispatchedMethodIsDescribedOnceInItsOwnType() {
        let names = MethodCatalog.documented.map { $0.method }
        #expect(Set(names).count == names.count)
        for type in MethodCatalog.documented { #expect(type.openRPC.name == type.method, "\(type)") }
        // Every documented server-to-client notification is one the server sends.
        let sent = MethodCatalog.documented.filter { $0.openRPC.direction == .serverToClient }.map { $0.method }
        #expect(Set(sent) == ["event", "subscription-state", "auth-prompt", "auth-failed", "session-changed", "log"])
    }

    @Test func implementedMethodsAreExactlyTheDispatchersMethods() async throws {
        let methods = try Self.document()["methods"]?.arrayValue ?? []
        let implemented = methods.filter {
            $0["x-status"] == "implemented" && $0["x-direction"] == "client-to-server"
        }
        let documentedRequests = Set(
            implemented.filter { $0["x-notification"] != true }.compactMap { $0["name"]?.stringValue })
        let documentedNotifications = Set(
            implemented.filter { $0["x-notification"] == true }.compactMap { $0["name"]?.stringValue })
        let server = try await RelayServer.make(options: ServerOptions(), settings: .empty)
        #expect(documentedRequests == Set(server.methodTable().keys))
        let handledNotifications = Set(server.notificationTable().keys)
            .union(server.readOrderNotificationTable().keys).union(Dispatcher.cancelMethods)
        #expect(documentedNotifications == handledNotifications)
    }

    @Test func everyMethodHasParamsStatusAndDirectionAndEveryErrorRefResolves() throws {
        let document = try Self.document()
        let errors = document["components"]?["errors"]?.objectValue ?? JSONObject()
        for method in document["methods"]?.arrayValue ?? [] {
            let name = method["name"]?.stringValue ?? "?"
            #expect(method["params"]?.arrayValue != nil, "\(name) has params")
            #expect(["implemented", "planned"].contains(method["x-status"]?.stringValue ?? ""), "\(name) status")
            #expect(["client-to-server", "server-to-client"].contains(method["x-direction"]?.stringValue ?? ""))
            for reference in method["errors"]?.arrayValue ?? [] {
                let path = reference["$ref"]?.stringValue ?? ""
                let key = String(path.split(separator: "/").last ?? "")
                #expect(errors[key] != nil, "\(name): \(path) resolves")
            }
        }
    }

    @Test func documentedErrorCodesAreTheCodesTheServerUses() throws {
        let errors = try Self.document()["components"]?["errors"]?.objectValue ?? JSONObject()
        let documented = Set(errors.members.map { "\($0.value["code"]?.jsonText ?? "") \($0.key)" })
        let used = Set(ErrorCode.all.map { "\($0.code.rawValue) \($0.kind.rawValue)" })
        #expect(documented == used)
    }

    @Test func documentedProtocolVersionIsTheServersAndCodesAvoidLSPsReservedOnes() throws {
        let document = try Self.document()
        #expect(document["info"]?["x-protocolVersion"] == .string(RelayServer.protocolVersion))
        let initialize = document["methods"]?.arrayValue?.first { $0["name"] == "initialize" }
        let schema = initialize?["result"]?["schema"]?["properties"]?["protocolVersion"]
        #expect(schema?["const"] == .string(RelayServer.protocolVersion))
        let codes = (document["components"]?["errors"]?.objectValue ?? JSONObject()).members.compactMap {
            $0.value["code"]
        }
        #expect(!codes.isEmpty)
        for reserved in ErrorCode.lspReserved { #expect(!codes.contains(.int(reserved)), "\(reserved) documented") }
    }
}

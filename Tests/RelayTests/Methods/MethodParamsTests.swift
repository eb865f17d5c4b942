import Testing
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// Each method's params decode into its type, and every problem is a -32602 whose
/// `data.diagnostics` point at the member (JSON Pointer into the params).
@Suite struct MethodParamsTests {
    /// The pointers of the -32602 that decoding `body` throws (empty when it does not throw one).
    static func pointers(_ body: () throws -> Void) -> [String] {
        do {
            try body()
            return []
        } catch let error as RPCError where error.code == .invalidParams {
            return (error.data["diagnostics"]?.arrayValue ?? []).compactMap { $0["pointer"]?.stringValue }
        } catch {
            return ["not invalid params: \(error)"]
        }
    }

    @Test func tokenGetDecodesItsMembersIntoTypes() throws {
        let params = try TokenGetMethod.Params(
            decoding: [
                "environment": "e", "profile": "p", "format": "exec-credential", "minValid": 120,
                "apiVersion": "client.authentication.k8s.io/v1beta1",
            ])
        #expect(params.environment == "e" && params.profile == "p")
        #expect(params.format == .execCredential && params.version == .v1beta1)
        #expect(params.minimumValidity == .seconds(120))
        let defaults = try TokenGetMethod.Params(decoding: nil)
        #expect(defaults.format == .json && defaults.minimumValidity == nil && defaults.version == .v1)
    }

    @Test func tokenGetPointsAtEveryBadMember() {
        let found = Self.pointers {
            _ = try TokenGetMethod.Params(decoding: ["format": "raw", "minValid": 86_401, "apiVersion": "v1", "x": 1])
        }
        #expect(Set(found) == ["/format", "/minValid", "/apiVersion", "/x"])
    }

    @Test func sessionSelectionRefusesAllWithANameAndUnknownMembers() throws {
        #expect(Self.pointers { _ = try SessionSelection(decoding: ["all": true, "environment": "e"]) } == ["/all"])
        #expect(Self.pointers { _ = try SessionSelection(decoding: ["enviroment": "e"]) } == ["/enviroment"])
        #expect(Self.pointers { _ = try SessionSelection(decoding: ["profile": 3]) } == ["/profile"])
        let all = try SessionSelection(decoding: ["all": true])
        #expect(all.all && all.environment == nil)
    }

    @Test func unsubscribeRequiresItsSubscription() throws {
        #expect(Self.pointers { _ = try UnsubscribeMethod.Params(decoding: nil) } == ["/subscription"])
        #expect(Self.pointers { _ = try UnsubscribeMethod.Params(decoding: ["subscription": 1]) } == ["/subscription"])
        #expect(try UnsubscribeMethod.Params(decoding: ["subscription": "sub-1"]).subscription == "sub-1")
    }

    @Test func loginTakesOnlyASessionSelection() throws {
        #expect(Self.pointers { _ = try LoginMethod.Params(decoding: ["all": true]) } == ["/all"])
        let params = try LoginMethod.Params(decoding: ["environment": "e"])
        #expect(params.environment == "e" && params.profile == nil)
    }

    @Test func initializeIgnoresLSPMembersButChecksProcessID() throws {
        let params = try InitializeMethod.Params(
            decoding: ["processId": 42, "rootUri": "file:///x", "capabilities": ["any": ["shape": true]]])
        #expect(params.processID == 42)
        #expect(Self.pointers { _ = try InitializeMethod.Params(decoding: ["processId": -1]) } == ["/processId"])
        #expect(try InitializeMethod.Params(decoding: ["processId": nil]).processID == nil)
    }

    @Test(arguments: [nil, JSONValue.null, [:], []] as [JSONValue?])
    func noParamsAcceptsEveryEmptySpelling(params: JSONValue?) throws {
        _ = try NoParams(decoding: params)
    }

    @Test func noParamsRefusesAMember() {
        #expect(Self.pointers { _ = try NoParams(decoding: ["verbose": true]) } == ["/verbose"])
    }

    @Test func testWaitBoundsItsDelay() throws {
        #expect(Self.pointers { _ = try TestWaitMethod.Params(decoding: ["ms": 3_600_001]) } == ["/ms"])
        let params = try TestWaitMethod.Params(decoding: ["ms": 5, "echo": "x"])
        #expect(params.milliseconds == 5 && params.echo == "x")
    }

    @Test func requestAndSubscribeParamsPointAtTheirMembers() {
        let context = RequestContext(id: .number(JSONNumber(1)), inBatch: false, sink: DiscardingSink())
        #expect(
            Self.pointers { _ = try RequestMethod.decode(["path": "items", "timeoutMs": 0], context: context) }
                == ["/path", "/timeoutMs"])
        // subscribe is GET only: a body member is unknown there.
        #expect(
            Self.pointers { _ = try SubscribeMethod.decode(["path": "/e", "json": [:]], context: context) } == ["/json"]
        )
    }

    @Test func subscribeInsideABatchIsAnInvalidRequestBeforeItsParamsAreRead() {
        let context = RequestContext(id: .number(JSONNumber(1)), inBatch: true, sink: DiscardingSink())
        #expect {
            _ = try SubscribeMethod.decode(["bogus": 1], context: context)
        } throws: { ($0 as? RPCError)?.code == .invalidRequest }
    }

    /// A sink that drops what it is given.
    final class DiscardingSink: MessageSink {
        func send(_ message: [UInt8]) async {}
        func sendNow(_ message: [UInt8]) {}
    }
}

import Testing
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

@testable import TokenRelayServer

@Suite struct ErrorMappingTests {
    /// One error of every module, with the kind it must reach the wire with.
    static let kindedErrors: [(any Error & Sendable, ErrorKind)] = [
        (AuthError.oauth(error: ServerText("invalid_client"), description: nil, status: 401), .auth),
        (AuthError.loginRequired("x"), .interactionRequired),
        (AuthError.loggedOut, .loggedOut),
        (AuthError.shuttingDown, .shuttingDown),
        (AuthError.loginAttemptsExceeded, .limit),
        (AuthError.storage("x"), .store),
        (HTTPError.transport("refused"), .transport),
        (HTTPError.tls("bad certificate"), .transport),
        (HTTPError.timeout, .timeout),
        (HTTPError.bodyTooLarge(limit: 10), .limit),
        (HTTPError.invalidURL("no scheme"), .invalidParams),
        (HTTPError.invalidRequest("bad header"), .invalidParams),
        (HTTPStreamStalled(idleTimeout: .seconds(1)), .timeout),
        (SecretError(location: "c.yaml:1:1", message: "unset"), .config),
        (SecretCommandError.emptyCommand, .config),
        (EventSourceFailure(kind: .httpStatus, message: "the server answered 404"), .httpStatus),
    ]

    @Test(arguments: 0..<kindedErrors.count)
    func everyModulesErrorReachesTheWireWithItsKindAndTheCodeOfThatKind(index: Int) {
        let (error, kind) = Self.kindedErrors[index]
        let mapped = ErrorMapping.rpcError(error)
        #expect(mapped.kind == kind, "\(error)")
        #expect(mapped.code == ErrorCode(kind: kind), "\(error)")
        #expect(mapped.jsonValue["data"]?["kind"] == .string(kind.rawValue))
    }

    @Test func codesAndKindsAreOneToOne() {
        let codes = ErrorCode.all.map(\.code.rawValue)
        let kinds = ErrorCode.all.map(\.kind)
        #expect(Set(codes).count == codes.count)
        #expect(Set(kinds).count == kinds.count)
        for (code, kind) in ErrorCode.all {
            #expect(ErrorCode(kind: kind) == code)
            #expect(code.kind == kind)
            #expect(!ErrorCode.lspReserved.contains(code.rawValue))
        }
        // Every kind but the two that only end a subscription has a code of its own.
        #expect(Set(ErrorKind.allCases).subtracting(kinds) == [.httpStatus, .protocol])
    }

    @Test func aLogoutReachesAWaitingRequestAsLoggedOutNotCancelled() {
        let mapped = ErrorMapping.rpcError(AuthError.loggedOut)
        #expect(mapped.code.rawValue == -32032)
        #expect(mapped.kind == .loggedOut)
        #expect(mapped.code != .requestCancelled)
    }

    @Test func aClosingManagerReachesARequestAsShuttingDown() {
        let mapped = ErrorMapping.rpcError(AuthError.shuttingDown)
        #expect(mapped.code == .shuttingDown)
        #expect(mapped.jsonValue["data"]?["kind"] == "shutting_down")
    }

    @Test(arguments: [HTTPError.invalidURL("no scheme"), HTTPError.invalidRequest("bad header")])
    func invalidParamsAlwaysCarryDiagnosticsWithAPointer(error: HTTPError) throws {
        let mapped = ErrorMapping.rpcError(error)
        #expect(mapped.code == .invalidParams)
        let diagnostics = try #require(mapped.data["diagnostics"]?.arrayValue)
        #expect(diagnostics.count == 1)
        #expect(diagnostics.first?["pointer"] == "")
        #expect(diagnostics.first?["reason"]?.stringValue?.isEmpty == false)
    }

    @Test func anErrorBuiltAsInvalidParamsWithoutDiagnosticsGetsThem() {
        let mapped = ErrorMapping.rpcError(RPCError(code: .invalidParams, message: "the git credential input is bad"))
        #expect(mapped.data["diagnostics"]?.arrayValue?.first?["reason"] == "the git credential input is bad")
    }

    @Test func existingDiagnosticsAreKept() {
        let error = RPCError.invalidParams([ParamDiagnostic(pointer: "/url", reason: "must be absolute")])
        #expect(ErrorMapping.rpcError(error) == error)
    }

    @Test func oauthDetailsTravelInData() {
        let error = AuthError.oauth(
            error: ServerText("invalid_grant"), description: ServerText("expired"), status: 400)
        let mapped = ErrorMapping.rpcError(error)
        #expect(mapped.data["oauthError"] == "invalid_grant")
        #expect(mapped.data["oauthErrorDescription"] == "expired")
        #expect(ErrorMapping.rpcError(AuthError.loginRequired("x")).data["login"] == true)
        #expect(ErrorMapping.rpcError(AuthError.loginRequired("x")).data["scopes"] == nil)
        #expect(
            ErrorMapping.rpcError(AuthError.loginRequired("x", scopes: ["mcp", "extra"])).data["scopes"]
                == ["mcp", "extra"])
    }

    @Test func cancellationIsCancelledOnlyWhenSomethingWasCancelled() {
        #expect(ErrorMapping.rpcError(CancellationError()).code == .requestCancelled)
        #expect(ErrorMapping.rpcError(HTTPError.cancelled).code == .requestCancelled)
        #expect(ErrorMapping.rpcError(AuthError.cancelled).code == .requestCancelled)
        #expect(ErrorMapping.rpcError(AuthError.loggedOut).code != .requestCancelled)
        #expect(ErrorMapping.rpcError(AuthError.shuttingDown).code != .requestCancelled)
    }

    @Test func anUnknownErrorIsInternalAndNamesOnlyItsType() {
        struct Opaque: Error { let secret = "s3cr3t" }
        let mapped = ErrorMapping.rpcError(Opaque())
        #expect(mapped.code == .internalError)
        #expect(!mapped.message.contains("s3cr3t"))
    }
}

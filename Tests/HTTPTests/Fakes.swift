import Synchronization

@testable import TokenRelayHTTP

/// Records every request and answers from a script (the last answer repeats).
final class FakeTransport: HTTPTransport {
    private let state: Mutex<(requests: [HTTPRequest], answers: [HTTPResponse])>

    init(_ answers: [HTTPResponse] = [HTTPResponse(status: 200)]) {
        state = Mutex(([], answers))
    }

    var requests: [HTTPRequest] { state.withLock { $0.requests } }

    func send(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        HTTPStreamingResponse(
            state.withLock { s in
                s.requests.append(request)
                return s.answers.count > 1 ? s.answers.removeFirst() : s.answers.first ?? HTTPResponse(status: 200)
            })
    }
}

/// Appends its name to a header on the way in and to `X-Trace` of the response on the way out.
struct TagMiddleware: HTTPMiddleware {
    let name: String

    func intercept(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPStreamingResponse
    ) async throws -> HTTPStreamingResponse {
        var tagged = request
        tagged.headers.add(name: "X-Order", value: name)
        var response = try await next(tagged)
        response.headers.add(name: "X-Trace", value: name)
        return response
    }
}

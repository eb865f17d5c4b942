import Synchronization
import TestSupport
import Testing
import TokenRelayErrorKinds

@testable import TokenRelayHTTP

/// Answers `stream` from a script, one entry per connection (the last one repeats), and records the requests.
final class ScriptedStreamingTransport: HTTPTransport {
    /// One connection's outcome: a thrown error, or a head and body chunks followed by an optional error.
    enum Answer: Sendable {
        case fail(HTTPError)
        case respond(status: Int, contentType: String = "text/event-stream", chunks: [String], then: (any Error)? = nil)
    }

    private let state: Mutex<(answers: [Answer], requests: [HTTPRequest])>

    init(_ answers: [Answer]) { state = Mutex((answers, [])) }

    var requests: [HTTPRequest] { state.withLock { $0.requests } }

    func send(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        guard case .streamed = request.delivery else { return HTTPStreamingResponse(HTTPResponse(status: 500)) }
        let answer = state.withLock { s in
            s.requests.append(request)
            return s.answers.count > 1 ? s.answers.removeFirst() : s.answers.first ?? .fail(.transport("no script"))
        }
        switch answer {
        case .fail(let error):
            throw error
        case .respond(let status, let contentType, let chunks, let failure):
            let body = AsyncThrowingStream<[UInt8], any Error> { continuation in
                for chunk in chunks { continuation.yield(Array(chunk.utf8)) }
                continuation.finish(throwing: failure)
            }
            return HTTPStreamingResponse(
                status: status, headers: HTTPHeaders([("Content-Type", contentType)]), body: HTTPByteStream(body))
        }
    }
}

/// ``EventSource`` decisions that need exact control over chunks and failures.
@Suite struct EventSourceScriptedTests {
    let sleeper = RecordingSleep()

    func source(_ transport: ScriptedStreamingTransport, maxLineLength: Int = 1 << 20) -> EventSource {
        EventSource(
            transport: transport,
            configuration: EventSourceConfiguration(
                request: HTTPRequest(
                    method: "POST", url: "http://127.0.0.1:1/events", body: [1, 2, 3], timeout: .seconds(1)),
                maxLineLength: maxLineLength, jitter: { 0 }, sleep: sleeper.sleep))
    }

    @Test func eventsCompletedBeforeAnOversizedLineAreDeliveredBeforeTheReconnect() async throws {
        let transport = ScriptedStreamingTransport([
            .respond(
                status: 200, chunks: ["id: 1\ndata: a\n\nid: 2\ndata: b\n\ndata: " + String(repeating: "x", count: 100)]
            ),
            .respond(status: 204, chunks: []),
        ])
        let updates = await collect(source(transport, maxLineLength: 32))
        #expect(updates.eventIDs == [1, 2])
        let states = updates.compactMap(\.stateChange)
        #expect(states.map(\.state) == [.connecting, .open, .reconnecting, .connecting, .closed])
        #expect(
            updates.firstIndex { $0.stateChange?.state == .reconnecting } ?? 0 > updates.lastIndex { $0.event != nil }
                ?? 0)
        #expect(states[2].error?.kind == .protocol)
        #expect(transport.requests.last?.headers["Last-Event-ID"] == "2")
    }

    @Test func everyConnectionIsAPlainGetWithStreamHeadersAndNoTotalTimeout() async throws {
        let transport = ScriptedStreamingTransport([.respond(status: 204, chunks: [])])
        _ = await collect(source(transport))
        let request = try #require(transport.requests.first)
        #expect(request.method == "GET" && request.body == nil && request.timeout == nil)
        #expect(request.headers["Accept"] == "text/event-stream")
        #expect(request.headers["Cache-Control"] == "no-cache")
        #expect(!request.headers.contains("Last-Event-ID"))
    }

    @Test(arguments: [
        (HTTPError.transport("refused"), ErrorKind.transport), (HTTPError.timeout, .timeout),
    ])
    func connectFailuresReconnectWithTheirKind(error: HTTPError, kind: ErrorKind) async throws {
        let transport = ScriptedStreamingTransport([.fail(error), .respond(status: 204, chunks: [])])
        let updates = await collect(source(transport))
        let reconnecting = try #require(updates.states(.reconnecting).first)
        #expect(reconnecting.error?.kind == kind && reconnecting.status == nil && reconnecting.attempt == 1)
        #expect(updates.last?.stateChange?.state == .closed)
    }

    @Test func aStallReconnectsAsATimeout() async throws {
        let transport = ScriptedStreamingTransport([
            .respond(status: 200, chunks: ["data: a\n\n"], then: HTTPStreamStalled(idleTimeout: .seconds(45))),
            .respond(status: 204, chunks: []),
        ])
        let updates = await collect(source(transport))
        #expect(updates.states(.reconnecting).first?.error?.kind == .timeout)
        #expect(updates.last?.stateChange?.state == .closed)
    }

    @Test(arguments: [
        (HTTPError.invalidURL("no scheme"), ErrorKind.invalidParams),
        (HTTPError.invalidRequest("the value of header X contains CR, LF or NUL"), .invalidParams),
        (HTTPError.tls("SSL certificate problem: unable to get local issuer certificate"), .transport),
    ])
    func anErrorNoReconnectCanCureClosesWithItsKindWithoutReconnecting(error: HTTPError, kind: ErrorKind) async throws {
        let transport = ScriptedStreamingTransport([.fail(error), .respond(status: 204, chunks: [])])
        let updates = await collect(source(transport))
        #expect(updates.states(.reconnecting).isEmpty)
        #expect(updates.last?.stateChange?.state == .closed)
        #expect(updates.last?.stateChange?.error?.kind == kind)
        #expect(transport.requests.count == 1)
    }

    @Test(arguments: ["text/event-stream; charset=utf-8", "Text/Event-Stream", " text/event-stream "])
    func eventStreamContentTypeIgnoresParametersAndCase(contentType: String) async throws {
        let transport = ScriptedStreamingTransport([
            .respond(status: 200, contentType: contentType, chunks: ["data: a\n\n"])
        ])
        let updates = await collect(source(transport)) { $0.event != nil }
        #expect(updates.compactMap(\.event) == [ServerSentEvent(data: "a")])
    }

    @Test(arguments: [1, 2, 3, 7])
    func eventsAreTheSameWhateverTheChunking(size: Int) async throws {
        let stream =
            "retry: 500\nid: 1\ndata: one\r\n\r\n: comment\nevent: tick\ndata: two\ndata: lines\r\rid: 3\ndata: three\n\n"
        let bytes = Array(stream.utf8)
        let chunks = stride(from: 0, to: bytes.count, by: size).map {
            String(decoding: bytes[$0..<min($0 + size, bytes.count)], as: UTF8.self)
        }
        let transport = ScriptedStreamingTransport([.respond(status: 200, chunks: chunks)])
        let updates = await collect(source(transport)) { $0.isEvent(id: 3) }
        #expect(
            updates.compactMap(\.event) == [
                ServerSentEvent(data: "one", lastEventID: "1", retry: 500),
                ServerSentEvent(type: "tick", data: "two\nlines", lastEventID: "1"),
                ServerSentEvent(data: "three", lastEventID: "3"),
            ])
    }

    @Test func aCancelledConsumerGetsNothingMore() async throws {
        let transport = ScriptedStreamingTransport([.respond(status: 200, chunks: ["data: a\n\ndata: b\n\n"])])
        let source = source(transport)
        let updates = await Task {
            var iterator = source.makeAsyncIterator()
            var updates: [EventSourceUpdate] = []
            while let update = await iterator.next() {
                updates.append(update)
                if update.event != nil { withUnsafeCurrentTask { $0?.cancel() } }
            }
            return updates
        }.value
        #expect(updates.compactMap(\.event) == [ServerSentEvent(data: "a")])
        #expect(updates.states(.closed).isEmpty)
    }
}

import TokenRelayHTTP

/// A request body bigger than ``ExecEndpoint/replayLimit``, sent as it arrives: the stream the
/// transport reads, what was read of it already, and how the rest is framed.
struct ExecUpload: Sendable {
    let stream: HTTPRequestBodyStream
    /// Body bytes already decoded (sent first).
    let decoded: [UInt8]
    /// Raw bytes read past them, still to decode (chunked).
    let input: [UInt8]
    /// Bytes of a sized body still to read; `nil` for a chunked one.
    let remaining: Int?
    /// The chunked body's decoder, where it stopped.
    let decoder: ChunkedBodyDecoder?
}

/// How a request's body is sent.
enum ExecBody {
    /// Read whole (kept for one replay after a 401): at most ``ExecEndpoint/replayLimit`` bytes.
    case whole([UInt8]?)
    /// Sent as it arrives, never replayed.
    case streamed(ExecUpload)
}

/// How the pump of a streamed body ended.
enum ExecPumpOutcome: Sendable {
    /// No body was streamed.
    case none
    /// The body was sent whole; these bytes were read past it (the next request's).
    case leftover([UInt8])
    /// The child's body was cut short or malformed, or the exchange ended first.
    case failed
}

struct ExecBodyRefusal: Error {
    var status: Int
    var message: String
}

extension ExecConnection {
    /// Reads the request body the head announces: whole up to the replay bound, else the start of
    /// a streamed one.
    mutating func readBody(_ framing: HTTPRequestHead.Body) async -> Result<ExecBody, ExecBodyRefusal> {
        switch framing {
        case .none:
            return .success(.whole(nil))
        case .length(let length) where length > ExecEndpoint.replayLimit:
            let first = Array(pending.prefix(length))
            pending.removeFirst(first.count)
            return .success(
                .streamed(
                    ExecUpload(
                        stream: HTTPRequestBodyStream(length: length), decoded: first, input: [],
                        remaining: length - first.count, decoder: nil)))
        case .length(let length):
            var body: [UInt8] = []
            body.reserveCapacity(length)
            body += pending.prefix(length)
            pending.removeFirst(body.count)
            while body.count < length {
                let chunk = await socket.read(upTo: min(64 << 10, length - body.count))
                guard !chunk.isEmpty else {
                    return .failure(ExecBodyRefusal(status: 400, message: "the request body ended early"))
                }
                body += chunk
            }
            return .success(.whole(body))
        case .chunked:
            var decoder = ChunkedBodyDecoder()
            var body: [UInt8] = []
            while true {
                let chunk = pending.isEmpty ? await socket.read(upTo: 64 << 10) : pending
                pending = []
                guard !chunk.isEmpty else {
                    return .failure(ExecBodyRefusal(status: 400, message: "the request body ended early"))
                }
                do {
                    let used = try decoder.feed(chunk[...], into: &body)
                    pending = Array(chunk[used...])
                } catch {
                    return .failure(ExecBodyRefusal(status: 400, message: error.description))
                }
                if decoder.isComplete { return .success(.whole(body)) }
                if body.count > ExecEndpoint.replayLimit {
                    defer { pending = [] }
                    return .success(
                        .streamed(
                            ExecUpload(
                                stream: HTTPRequestBodyStream(length: nil), decoded: body, input: pending,
                                remaining: nil, decoder: decoder)))
                }
            }
        }
    }

    /// Feeds a streamed body to its stream from the child's socket until it is complete; what it
    /// read past the body. Ends early when the stream does (the exchange ended) or the child's
    /// body is cut short or malformed (the stream is aborted: the transfer fails, nothing short is sent).
    static func pump(_ upload: ExecUpload?, socket: ExecSocket) async -> ExecPumpOutcome {
        guard let upload else { return .none }
        let stream = upload.stream
        guard await stream.write(upload.decoded) else { return .failed }
        var input = upload.input
        var remaining = upload.remaining
        var decoder = upload.decoder
        while true {
            if remaining == 0 {
                stream.finish()
                return .leftover(input)
            }
            if input.isEmpty {
                input = await socket.read(upTo: min(64 << 10, remaining ?? 64 << 10))
                guard !input.isEmpty else {
                    stream.abort()
                    return .failed
                }
            }
            if var chunked = decoder {
                var decoded: [UInt8] = []
                do {
                    let used = try chunked.feed(input[...], into: &decoded)
                    input = Array(input[used...])
                } catch {
                    stream.abort()
                    return .failed
                }
                decoder = chunked
                guard await stream.write(decoded) else { return .failed }
                if chunked.isComplete {
                    stream.finish()
                    return .leftover(input)
                }
            } else if let left = remaining {
                let take = min(left, input.count)
                guard await stream.write(Array(input[..<take])) else { return .failed }
                remaining = left - take
                input = Array(input[take...])
            }
        }
    }
}

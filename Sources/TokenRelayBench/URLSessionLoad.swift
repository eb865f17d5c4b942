import Foundation
import FoundationNetworking
import Synchronization

/// The URLSession reference (the naive Swift choice): `inflight` tasks on one ephemeral session,
/// each looping over data tasks until `total` requests have been made. This is the only file in
/// the package that imports FoundationNetworking.
enum URLSessionLoad {
    /// Hands out request numbers to the workers.
    private final class Claims: Sendable {
        private let next = Mutex(0)
        private let total: Int
        init(total: Int) { self.total = total }

        /// Claims the next request, or `false` when all are claimed.
        func claim() -> Bool {
            next.withLock { value in
                guard value < total else { return false }
                value += 1
                return true
            }
        }
    }

    /// `total` GETs of `url` with `inflight` outstanding; an answer other than 200 is an error.
    static func run(url: String, inflight: Int, total: Int, header: (String, String)?) async -> LoadResult {
        guard let target = URL(string: url) else { die("bad URL \(url)") }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = inflight
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        let session = URLSession(configuration: configuration)
        var request = URLRequest(url: target)
        if let header { request.setValue(header.1, forHTTPHeaderField: header.0) }
        let claims = Claims(total: total)
        let begin = monotonicNanos()
        let outcome = await withTaskGroup(of: ([UInt64], Int).self) { group in
            for _ in 0..<min(inflight, total) {
                group.addTask { [request] in
                    var latencies: [UInt64] = []
                    var errors = 0
                    while claims.claim() {
                        let start = monotonicNanos()
                        let ok = await fetch(session, request)
                        latencies.append(monotonicNanos() - start)
                        if !ok { errors += 1 }
                    }
                    return (latencies, errors)
                }
            }
            var latencies: [UInt64] = []
            var errors = 0
            for await (part, failed) in group {
                latencies += part
                errors += failed
            }
            return (latencies, errors)
        }
        session.finishTasksAndInvalidate()
        return LoadResult(
            completed: total, errors: outcome.1, wallNanos: monotonicNanos() - begin, latencies: outcome.0)
    }

    /// One data task; `true` for a 200 answer.
    private static func fetch(_ session: URLSession, _ request: URLRequest) async -> Bool {
        await withCheckedContinuation { continuation in
            session.dataTask(with: request) { _, response, error in
                let status = (response as? HTTPURLResponse)?.statusCode
                continuation.resume(returning: error == nil && status == 200)
            }.resume()
        }
    }
}

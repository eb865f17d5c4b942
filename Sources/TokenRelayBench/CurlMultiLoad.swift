import CCurl

/// The libcurl reference: one thread driving libcurl's multi interface with `inflight` easy
/// handles, each re-added as soon as it finishes (keep-alive connections are reused from the
/// multi handle's pool). No JSON, no middleware: the HTTP ceiling of the library tokenrelay uses.
enum CurlMultiLoad {
    private static let discard: tr_curl_data_callback = { _, size, count, _ in size * count }

    /// `total` GETs of `url` with `inflight` outstanding; an answer other than 200 is an error.
    static func run(url: String, inflight: Int, total: Int, header: String?) -> LoadResult {
        // The CCurl shim's typed setopt wrappers go through its dlopen table: load it first.
        guard tr_curl_load() == 1, curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK, let multi = curl_multi_init()
        else {
            die("libcurl init failed")
        }
        defer { curl_multi_cleanup(multi) }
        let slots = min(inflight, total)
        var headerList: UnsafeMutablePointer<curl_slist>? = nil
        if let header { headerList = curl_slist_append(nil, header) }
        defer { curl_slist_free_all(headerList) }
        var handles: [UnsafeMutableRawPointer] = []
        for slot in 0..<slots {
            guard let easy = curl_easy_init() else { die("curl_easy_init failed") }
            _ = tr_easy_setopt_string(easy, CURLOPT_URL, url)
            _ = tr_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
            _ = tr_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, discard)
            _ = tr_easy_setopt_pointer(easy, CURLOPT_PRIVATE, UnsafeMutableRawPointer(bitPattern: slot + 1))
            if let headerList { _ = tr_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList) }
            handles.append(easy)
        }
        defer { handles.forEach { curl_easy_cleanup($0) } }

        var started = [UInt64](repeating: 0, count: slots)
        var latencies: [UInt64] = []
        latencies.reserveCapacity(total)
        var errors = 0
        var launched = 0
        let begin = monotonicNanos()
        for slot in 0..<slots {
            started[slot] = monotonicNanos()
            _ = curl_multi_add_handle(multi, handles[slot])
            launched += 1
        }
        while latencies.count < total {
            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            var remaining: Int32 = 0
            while let message = curl_multi_info_read(multi, &remaining) {
                guard tr_msg_is_done(message) != 0, let easy = message.pointee.easy_handle else { continue }
                let now = monotonicNanos()
                var privateData: UnsafeMutableRawPointer? = nil
                _ = tr_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &privateData)
                let slot = Int(bitPattern: privateData) - 1
                var status = 0
                _ = tr_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
                if tr_msg_result(message) != CURLE_OK || status != 200 { errors += 1 }
                latencies.append(now - started[slot])
                _ = curl_multi_remove_handle(multi, easy)
                if launched < total {
                    started[slot] = monotonicNanos()
                    _ = curl_multi_add_handle(multi, easy)
                    launched += 1
                }
            }
            if latencies.count < total { _ = curl_multi_poll(multi, nil, 0, 100, nil) }
        }
        return LoadResult(completed: total, errors: errors, wallNanos: monotonicNanos() - begin, latencies: latencies)
    }
}

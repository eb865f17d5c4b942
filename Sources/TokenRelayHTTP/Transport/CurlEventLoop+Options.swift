import CCurl
import CSystem
import FoundationEssentials
import TokenRelayLogging

#if canImport(Glibc)
    import Glibc
#endif

// The easy handles' options (unsafe C work, under CurlEventLoop.swift's invariants): a pooled
// handle is never reset, so `configure` sets every option it uses on every transfer.
extension CurlEventLoop {
    /// The options that are the same for every transfer of this loop, set once when an easy
    /// handle is created (a pooled handle keeps them: it is never reset).
    func setFixedOptions(_ easy: CurlEasyHandle) {
        let h = easy.handle
        _ = tr_easy_setopt_pointer(h, CURLOPT_ERRORBUFFER, easy.errorBuffer)
        _ = tr_easy_setopt_long(h, CURLOPT_NOSIGNAL, 1)
        _ = tr_easy_setopt_string(h, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = tr_easy_setopt_string(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        _ = tr_easy_setopt_long(h, CURLOPT_FOLLOWLOCATION, 0)
        _ = tr_easy_setopt_long(h, CURLOPT_NETRC, Int(CURL_NETRC_IGNORED.rawValue))
        _ = tr_easy_setopt_long(h, CURLOPT_SSL_VERIFYPEER, 1)
        _ = tr_easy_setopt_long(h, CURLOPT_SSL_VERIFYHOST, 2)
        _ = tr_easy_setopt_long(h, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        _ = tr_easy_setopt_long(h, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        if let caFile = options.caFile {
            _ = caFile.withCString { tr_easy_setopt_string(h, CURLOPT_CAINFO, $0) }
        }
        _ = tr_easy_setopt_data_callback(h, CURLOPT_WRITEFUNCTION, curlWriteCallback)
        _ = tr_easy_setopt_data_callback(h, CURLOPT_HEADERFUNCTION, curlHeaderCallback)
    }

    /// Sets every option that depends on the transfer; returns an error for an unusable request.
    /// A pooled handle still holds the previous transfer's options (it is not reset: resetting
    /// and setting the fixed options again showed in the loop's profile), so EVERY
    /// option set here is set on every transfer — to its value, or back to libcurl's default.
    func configure(_ easy: CurlEasyHandle, for transfer: CurlTransfer) -> HTTPError? {
        let h = easy.handle
        let request = transfer.request
        easy.errorBuffer[0] = 0
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        _ = tr_easy_setopt_pointer(h, CURLOPT_PRIVATE, context)
        _ = tr_easy_setopt_pointer(h, CURLOPT_WRITEDATA, context)
        _ = tr_easy_setopt_pointer(h, CURLOPT_HEADERDATA, context)
        // The parse the origin decision was made on: libcurl does not parse the URL again.
        guard
            tr_easy_setopt_pointer(h, CURLOPT_CURLU, UnsafeMutableRawPointer(transfer.target.handle.handle)) == CURLE_OK
        else {
            return .invalidURL("the URL could not be used")
        }
        // Without CURLOPT_PROXY (NULL) libcurl reads http_proxy / https_proxy / all_proxy /
        // no_proxy. Loopback never goes through a proxy: "" disables every proxy for this
        // transfer only, so NO_PROXY and the other variables keep applying to every other destination.
        if transfer.target.isLoopback {
            _ = tr_easy_setopt_string(h, CURLOPT_PROXY, "")
        } else if let proxy = options.proxy {
            _ = proxy.withCString { tr_easy_setopt_string(h, CURLOPT_PROXY, $0) }
        } else {
            _ = tr_easy_setopt_pointer(h, CURLOPT_PROXY, nil)
        }
        // Mutual TLS: the request's certificate and key, or none (a pooled handle may hold the
        // previous transfer's). libcurl copies the blobs and matches them when reusing connections.
        if let identity = request.clientIdentity {
            let certificate = identity.certificatePEM.withUnsafeBytes {
                tr_easy_setopt_blob(h, CURLOPT_SSLCERT_BLOB, $0.baseAddress, $0.count)
            }
            let key = identity.keyPEM.withUnsafeBytes {
                tr_easy_setopt_blob(h, CURLOPT_SSLKEY_BLOB, $0.baseAddress, $0.count)
            }
            // Never sent without the certificate it must present (a libcurl without blob support).
            guard certificate == CURLE_OK, key == CURLE_OK,
                tr_easy_setopt_string(h, CURLOPT_SSLCERTTYPE, "PEM") == CURLE_OK,
                tr_easy_setopt_string(h, CURLOPT_SSLKEYTYPE, "PEM") == CURLE_OK
            else {
                _ = tr_easy_setopt_blob(h, CURLOPT_SSLCERT_BLOB, nil, 0)
                _ = tr_easy_setopt_blob(h, CURLOPT_SSLKEY_BLOB, nil, 0)
                return .tls("this libcurl cannot present a client certificate from memory")
            }
            handlesWithClientIdentity.insert(h)
        } else if !handlesWithClientIdentity.isEmpty, handlesWithClientIdentity.remove(h) != nil {
            _ = tr_easy_setopt_blob(h, CURLOPT_SSLCERT_BLOB, nil, 0)
            _ = tr_easy_setopt_blob(h, CURLOPT_SSLKEY_BLOB, nil, 0)
        }
        // Content codings: "" asks for every coding this libcurl decodes and makes it decode any
        // coding the response names; NULL (libcurl's default) asks for none and decodes nothing.
        if request.decodesContent {
            _ = tr_easy_setopt_string(h, CURLOPT_ACCEPT_ENCODING, "")
        } else {
            _ = tr_easy_setopt_pointer(h, CURLOPT_ACCEPT_ENCODING, nil)
        }
        let connectTimeout = request.connectTimeout ?? options.connectTimeout
        _ = tr_easy_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(connectTimeout))
        switch transfer.sink {
        case .buffered(let limit):
            let timeout = request.effectiveTimeout(now: .now).map(Self.milliseconds) ?? 0
            _ = tr_easy_setopt_long(h, CURLOPT_TIMEOUT_MS, timeout)
            _ = tr_easy_setopt_off(h, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limit))
            _ = tr_easy_setopt_long(h, CURLOPT_TCP_KEEPALIVE, 0)
        case .stream:
            _ = tr_easy_setopt_long(h, CURLOPT_TIMEOUT_MS, 0)
            _ = tr_easy_setopt_off(h, CURLOPT_MAXFILESIZE_LARGE, 0)
            _ = tr_easy_setopt_long(h, CURLOPT_TCP_KEEPALIVE, 1)
        }

        // The method from a clean slate: GET (which also clears an earlier HEAD or upload) and no
        // custom request line; then this request's body, HEAD or custom method.
        _ = tr_easy_setopt_long(h, CURLOPT_HTTPGET, 1)
        _ = tr_easy_setopt_pointer(h, CURLOPT_CUSTOMREQUEST, nil)
        let method = request.method
        if let stream = request.bodyStream {
            _ = tr_easy_setopt_long(h, CURLOPT_POST, 1)
            _ = tr_easy_setopt_off(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(stream.length ?? -1))
            _ = tr_easy_setopt_pointer(h, CURLOPT_POSTFIELDS, nil)
            _ = tr_easy_setopt_data_callback(h, CURLOPT_READFUNCTION, curlReadCallback)
            _ = tr_easy_setopt_pointer(h, CURLOPT_READDATA, context)
            stream.attach { [weak self] in _ = self?.enqueue(.resumeUpload(transfer)) }
            if method != "POST" {
                _ = method.withCString { tr_easy_setopt_string(h, CURLOPT_CUSTOMREQUEST, $0) }
            }
        } else if let body = request.body ?? (CurlTransfer.bodyMethods.contains(method) ? [] : nil) {
            _ = tr_easy_setopt_off(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            if body.isEmpty {
                _ = tr_easy_setopt_string(h, CURLOPT_POSTFIELDS, "")
            } else {
                _ = body.withUnsafeBytes { bytes in
                    tr_easy_setopt_pointer(
                        h, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
                }
            }
            if method != "POST" {
                _ = method.withCString { tr_easy_setopt_string(h, CURLOPT_CUSTOMREQUEST, $0) }
            }
        } else if method == "HEAD" {
            _ = tr_easy_setopt_long(h, CURLOPT_NOBODY, 1)
        } else if method != "GET" {
            _ = method.withCString { tr_easy_setopt_string(h, CURLOPT_CUSTOMREQUEST, $0) }
        }

        var list: UnsafeMutablePointer<curl_slist>? = nil
        for line in transfer.headerLines {
            guard let appended = line.withCString({ tr_slist_append(list, $0) }) else {
                tr_slist_free_all(list)
                return .transport("out of memory building request headers")
            }
            list = appended
        }
        transfer.headerList = list
        _ = tr_easy_setopt_slist(h, CURLOPT_HTTPHEADER, list)
        return nil
    }
}

// MARK: - C callbacks (loop thread only, inside curl_multi_perform or curl_easy_pause)

/// CURLOPT_WRITEFUNCTION: body bytes. `userdata` is an unretained CurlTransfer kept alive by `active`.
private let curlWriteCallback: tr_curl_data_callback = { data, size, count, userdata in
    guard let userdata else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    let length = size * count
    let bytes = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : length)
    switch transfer.sink {
    case .buffered(let limit):
        if transfer.body.count + length > limit {
            transfer.bodyTooLarge = true
            return 0
        }
        transfer.body.append(contentsOf: bytes)
        return length
    case .stream(let channel):
        transfer.lastActivityNanoseconds = CurlEventLoop.now()
        switch channel.offer(bytes) {
        case .taken: return length
        case .pause: return tr_writefunc_pause()
        case .abort: return 0
        }
    }
}

/// CURLOPT_READFUNCTION: the request body stream's next bytes, its end, or a pause until it has more.
/// Bytes sent are activity: a long upload, during which the server answers nothing yet, is not a
/// stalled stream.
private let curlReadCallback: tr_curl_data_callback = { data, size, count, userdata in
    guard let userdata, let data else { return tr_readfunc_abort() }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    guard let stream = transfer.request.bodyStream else { return tr_readfunc_abort() }
    switch stream.read(into: UnsafeMutableRawBufferPointer(start: data, count: size * count)) {
    case .bytes(let read):
        transfer.lastActivityNanoseconds = CurlEventLoop.now()
        return read
    case .end: return 0
    case .pause: return tr_readfunc_pause()
    case .abort: return tr_readfunc_abort()
    }
}

/// CURLOPT_HEADERFUNCTION: one header line. Delivers a stream's head when it completes.
private let curlHeaderCallback: tr_curl_data_callback = { data, size, count, userdata in
    guard let userdata else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    let length = size * count
    guard let data else { return length }
    let line = UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: length)
    let completed = transfer.head.consume(line: line)
    if completed, case .buffered(let limit) = transfer.sink, let easy = transfer.easy {
        // Size the body once when the length is announced (and allowed).
        var length: curl_off_t = -1
        if tr_easy_getinfo_off(easy.handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK,
            length > 0, length <= limit
        {
            transfer.body.reserveCapacity(Int(length))
        }
    }
    if case .stream = transfer.sink {
        transfer.lastActivityNanoseconds = CurlEventLoop.now()
        if completed, let headContinuation = transfer.headContinuation {
            transfer.headContinuation = nil
            headContinuation.resume(returning: transfer.currentHead)
        }
    }
    return length
}

import TokenRelayLogging
import TokenRelayPlatform

#if canImport(Glibc)
    import Glibc
#endif

/// The input a loop adopted (the server's stdin, ``PolledInput``), read between transfers on
/// the loop thread: polled beside the wakeup descriptor, read only for what it holds, left out
/// while its output is backed up.
extension CurlEventLoop {
    func take(_ adopted: any PolledInput) {
        guard input == nil else {
            adopted.handBack()
            return
        }
        input = adopted
        inputPaused = false
        inputMayReadAgain = { [weak self] in self?.enqueue(.inputMayRead) }
        log.debug("stdin: read by a transfer loop from now on")
    }

    /// The adopted input's poll descriptor when it may read now; otherwise `nil` (and, when its
    /// output is backed up, the input tells the loop once it may read again).
    func readableInputDescriptor() -> Int32? {
        guard let input, !inputPaused else { return nil }
        guard input.mayRead(resume: inputMayReadAgain) else {
            inputPaused = true
            return nil
        }
        return input.fileDescriptor
    }

    /// Reads the input once (its descriptor polled readable); forgets it at its end.
    func readInput() {
        if let input, !input.readAvailable() { self.input = nil }
    }
}

extension CurlEventLoop: InputPoller {
    /// Takes `input` over: the loop reads it from its next turn.
    func adopt(_ input: any PolledInput) -> Bool {
        enqueue(.adopt(input))
    }
}

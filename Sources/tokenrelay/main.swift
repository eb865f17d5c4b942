import Config
import Dispatch
import FoundationEssentials
import Glibc
import JSONRPC
import Logging
import Relay
import Synchronization

// tokenrelay's entry point: arguments, stdout protection, signals, exit code. Everything else
// lives in the libraries.

/// Runs the command on a task and waits for it on the main thread: a synchronous main, so the
/// process ends from here instead of through `dispatch_main`'s main queue (which starts a thread
/// of its own for the last step of an async main).
func runCommand() -> Int32 {
    ProcessSetup.resetSignals()
    let arguments = Array(CommandLine.arguments.dropFirst())
    let environment = ProcessEnvironment.current()
    let finished = DispatchSemaphore(value: 0)
    let exitCode = Atomic<Int32>(0)
    Task.detached {
        exitCode.store(await CommandLineTool.run(arguments: arguments, environment: environment), ordering: .relaxed)
        finished.signal()
    }
    finished.wait()
    return exitCode.load(ordering: .relaxed)
}

let exitCode = runCommand()
log.flush()
exit(exitCode)

import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

// tokenrelay's entry point: arguments, stdout protection, signals, exit code. Everything else
// lives in the libraries.

/// Runs the command on a task whose jobs the main thread runs (``ThreadExecutor``) until it ends:
/// a synchronous main, so the process ends from here instead of through `dispatch_main`'s main
/// queue (which starts a thread of its own for the last step of an async main), and no
/// cooperative-pool thread is started on the way to the first answer.
func runCommand() -> Int32 {
    ProcessSetup.resetSignals()
    let (command, arguments) = CommandLineTool.command(of: Array(CommandLine.arguments.dropFirst()))
    ProcessSetup.useOneMallocArena()
    let environment = ProcessEnvironment.current()
    let mainThread = ThreadExecutor()
    let exitCode = Atomic<Int32>(0)
    Task.detached(executorPreference: mainThread) {
        exitCode.store(
            await CommandLineTool.run(command, arguments: arguments, environment: environment, executor: mainThread),
            ordering: .relaxed)
        mainThread.finish()
    }
    mainThread.run()
    return exitCode.load(ordering: .relaxed)
}

let exitCode = runCommand()
log.flush()
// `exit` would add only library teardown (OpenSSL's atexit cleanup, C++ static destructors) of
// memory the kernel frees anyway: ~0.3 ms of every `call`. By now the command has closed or
// flushed everything it owns (the store, its transfers, stdout, the log); stdio's buffers, which
// `--version` and `--help` print through, are flushed here.
fflush(nil)
_exit(exitCode)

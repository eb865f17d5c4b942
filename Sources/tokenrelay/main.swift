import Glibc
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform
import TokenRelayServer

// tokenrelay's entry point: arguments, stdout protection, signals, exit code. Everything else
// lives in the libraries.

/// Runs the command on the main thread, which becomes where the process's own tasks run
/// (``Placement/runOnMainThread(_:)``): a synchronous main, so the process ends from here instead
/// of through `dispatch_main`'s main queue (which starts a thread of its own for the last step of
/// an async main), and no cooperative-pool thread is started on the way to the first answer.
func runCommand() -> Int32 {
    ProcessSetup.resetSignals()
    let (command, arguments) = CommandLineTool.command(of: Array(CommandLine.arguments.dropFirst()))
    ProcessSetup.useOneMallocArena()
    let environment = ProcessEnvironment.current()
    return Placement.runOnMainThread {
        await CommandLineTool.run(command, arguments: arguments, environment: environment)
    }
}

let exitCode = runCommand()
log.flush()
// `exit` would add only library teardown (OpenSSL's atexit cleanup, C++ static destructors) of
// memory the kernel frees anyway, on every `call`'s path. By now the command has closed or
// flushed everything it owns (the store, its transfers, stdout, the log); stdio's buffers, which
// `--version` and `--help` print through, are flushed here.
fflush(nil)
_exit(exitCode)

import Config
import FoundationEssentials
import Glibc
import JSONRPC
import Logging
import Relay

// tokenrelay's entry point: arguments, stdout protection, signals, exit code. Everything else
// lives in the libraries.

ProcessSetup.resetSignals()
let arguments = Array(CommandLine.arguments.dropFirst())
let exitCode = await CommandLineTool.run(arguments: arguments, environment: ProcessEnvironment.current())
log.flush()
exit(exitCode)

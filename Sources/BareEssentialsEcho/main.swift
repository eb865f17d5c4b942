import FoundationEssentials
import Glibc

// The second cold-start reference for scripts/bench: a binary that imports FoundationEssentials
// (what tokenrelay's modules import) and nothing else, built and linked exactly like tokenrelay,
// that reads one line and echoes it. tokenrelay against this binary is what its own start-up
// costs; against BareFoundationEcho, what a Swift program with Foundation costs to start. It then
// waits for the end of its input, as tokenrelay does, so the driver can read what it has mapped.

if let line = readLine(strippingNewline: false) {
    let bytes = Data(line.utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}
while readLine() != nil {}

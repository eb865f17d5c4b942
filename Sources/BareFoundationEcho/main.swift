import Foundation

// The cold-start reference for scripts/bench: a binary that imports Foundation (nothing else),
// built and linked exactly like tokenrelay, that reads one line and echoes it. tokenrelay's
// "spawn to first ping answer" is compared with this binary's "spawn to first echoed line".
// It then waits for the end of its input, as tokenrelay does, so the driver can read what it
// has mapped (/proc/<pid>/maps) while it runs.

if let line = readLine(strippingNewline: false) {
    try? FileHandle.standardOutput.write(contentsOf: Data(line.utf8))
}
while readLine() != nil {}

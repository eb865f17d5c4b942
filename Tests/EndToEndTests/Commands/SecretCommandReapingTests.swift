import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// A `serve` that runs many secret commands which time out leaves no zombie child behind: the
/// command's own process (the shell) is reaped on every path, not only the group it started
/// ended (issue 34, finding 9). Each timed-out command used to leak a process-table entry.
@Suite struct SecretCommandReapingTests {
    /// The direct children of `parent` that are zombies (`/proc/PID/stat`: `pid (comm) state ppid ...`).
    static func zombieChildren(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { name -> pid_t? in
            guard let pid = pid_t(name),
                let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count >= 2, fields[0] == "Z", pid_t(fields[1]) == parent else { return nil }
            return pid
        }
    }

    @Test func timedOutSecretCommandsLeaveNoZombieChildOfTheServer() async throws {
        let profiles = 8
        var config = """
            version: 1
            environments:
              local:
                base_url: http://127.0.0.1:1
                profiles:

            """
        for index in 0..<profiles {
            config += """
                      p\(index):
                        type: bearer
                        token: { command: [/bin/sh, -c, "sleep 30 & sleep 30; echo token-\(index)"], timeout: 1s }

                """
        }
        let client = try RelayClient(config: config)
        // Two rounds of every profile at once: the commands time out side by side, under load.
        for round in 0..<2 {
            try await withThrowingTaskGroup(of: JSONValue.self) { group in
                for index in 0..<profiles {
                    group.addTask {
                        try await client.call(
                            "request", #"{"profile":"p\#(index)","path":"/x"}"#, id: "r\(round)-p\(index)")
                    }
                }
                for try await reply in group {
                    #expect(reply["error"] != nil, "\(reply)")
                    #expect(reply["error"]?["message"]?.stringValue?.contains("did not finish within") == true)
                }
            }
        }
        // Each reply came after its run returned, and a run returns once its child is reaped.
        let zombies = Self.zombieChildren(of: client.relay.pid)
        #expect(zombies.isEmpty, "zombie children of tokenrelay: \(zombies)")
        #expect(try await client.finish() == 0)
    }
}

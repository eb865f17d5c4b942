// Makes one authenticated request with tokenrelay's library and prints its status.
//   EXAMPLE_BASE_URL=http://127.0.0.1:8080 EXAMPLE_API_KEY=... swift run AuthenticatedRequest [PATH]
import Foundation
import TokenRelay

let environment = ProcessInfo.processInfo.environment
let baseURL = environment["EXAMPLE_BASE_URL"] ?? "http://127.0.0.1:8080"
let path = CommandLine.arguments.dropFirst().first ?? "/"

do {
    // The same settings a config file holds; the key is read from the environment variable.
    let client = try await TokenRelayClient.make(
        TokenRelayConfiguration(environments: [
            .init(
                "local", baseURL: baseURL,
                profiles: [.init("key", .apiKey(header: "X-API-Key", value: .environment("EXAMPLE_API_KEY")))])
        ]))
    let response = try await client.request("GET", path)
    print("status \(response.status)")
    await client.close()
} catch {
    // A TokenRelayError: its kind (config, transport, auth, ...) and a message without secrets.
    FileHandle.standardError.write(Data("AuthenticatedRequest: \(error)\n".utf8))
    exit(1)
}

import Foundation

/// Config texts the Config and Commands tests share (plain YAML, no parsing here).

/// A config with one environment `e` and one profile `p` whose body is `profile` (lines at
/// 8-space indent are added here); the profile body's first line is line 7.
public func profileConfig(_ profile: String) -> String {
    let body = profile.split(separator: "\n", omittingEmptySubsequences: false).map { "        " + $0 }.joined(
        separator: "\n")
    return """
        version: 1
        environments:
          e:
            base_url: https://api.example.com
            profiles:
              p:
        \(body)

        """
}

/// A bearer profile whose token comes from `source` (YAML flow syntax).
public func bearerConfig(_ source: String) -> String {
    profileConfig("type: bearer\ntoken: \(source)")
}

/// The environment secret commands run with: python3 is found on this PATH.
public let commandEnvironment = ["PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/u"]

/// The repository root, found from this file's path.
public let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

import TokenRelayConfig
import TokenRelayHTTP

/// Where a request to `tokenrelay exec`'s endpoint goes (SPEC §12): `/ENV/...` is environment
/// `ENV`'s `base_url` + `...`, the query kept. The path is normalised by the rules' one
/// normaliser (``MCPPath/normalise(_:)``, SPEC §8): a `.`/`..` segment, an encoded `/` or `\`, a
/// `;` parameter or an empty segment is refused, however encoded. Pure.
struct ExecTarget: Sendable, Equatable {
    /// The environment named by the first segment.
    var environment: String
    /// The path relative to the environment's `base_url`, normalised (`/` when none was given).
    var path: MCPPath
    /// The query as sent, without its `?`; `nil` when there was none.
    var query: String?

    /// Why a target is refused (answered 400, or 404 for an environment that is not served).
    struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        var description: String
        /// Whether the environment is unknown (404) rather than the path malformed (400).
        var unknownEnvironment = false
    }

    /// Resolves an origin-form `target` (``HTTPRequestHead/target``) against the served
    /// environments' names.
    static func resolve(_ target: String, served: Set<String>) -> Result<ExecTarget, Refusal> {
        let pathPart: Substring
        var query: String?
        if let mark = target.firstIndex(of: "?") {
            pathPart = target[..<mark]
            query = String(target[target.index(after: mark)...])
        } else {
            pathPart = target[...]
        }
        if pathPart.contains("#") || (query?.contains("#") ?? false) {
            return .failure(Refusal(description: "a fragment ('#') is never sent to a server"))
        }
        let normalised: MCPPath
        switch MCPPath.normalise(String(pathPart)) {
        case .success(let value): normalised = value
        case .failure(let problem): return .failure(Refusal(description: "refused: \(problem.description)"))
        }
        guard let environment = normalised.segments.first, !environment.isEmpty else {
            return .failure(
                Refusal(
                    description: "the path must start with an environment: /ENVIRONMENT/...",
                    unknownEnvironment: true))
        }
        guard served.contains(environment) else {
            return .failure(
                Refusal(description: "no environment of this endpoint is named so", unknownEnvironment: true))
        }
        // The segments are normalised already: normalising them again only rebuilds the value.
        switch MCPPath.normalise("/" + normalised.segments.dropFirst().joined(separator: "/")) {
        case .success(let path): return .success(ExecTarget(environment: environment, path: path, query: query))
        case .failure(let problem): return .failure(Refusal(description: "refused: \(problem.description)"))
        }
    }
}

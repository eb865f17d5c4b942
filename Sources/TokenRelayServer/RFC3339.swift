import FoundationEssentials

extension Date {
    /// The date as an RFC 3339 timestamp in UTC, to the second (`2026-12-01T10:00:00Z`): how
    /// every time tokenrelay reports (session expiry, login prompts, credential helpers) is written.
    var rfc3339: String { formatted(Date.ISO8601FormatStyle()) }
}

import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayPlatform

/// How the server runs: from the command line and the config's `server` block.
public struct ServerOptions: Sendable {
    /// `nil`: detect from the first bytes.
    public var framing: Framing?
    public var framingLimits: FramingLimits
    public var dispatcherLimits: DispatcherLimits
    /// How long in-flight requests may run after stdin EOF or SIGTERM before they are cancelled.
    public var gracePeriod: Duration
    /// Enables `test/wait`, a method the end-to-end tests use to hold a request open
    /// (set `TOKENRELAY_ENABLE_TEST_METHODS=1`). Never documented, never on by default; a test
    /// hook, so not public API (`@_spi(Testing) import Relay`).
    @_spi(Testing) public var testMethods = false
    /// With `testMethods`: a FIFO every renewal waits on after taking its lease
    /// (`TOKENRELAY_TEST_LEASE_GATE`), so tests can kill a lease holder before it sends.
    @_spi(Testing) public var testLeaseGate: String?
    /// Loads the configuration again, from the same place and in the same way as at start
    /// (`config-reload` and SIGHUP); `nil`: there is nothing to reload.
    public var loadConfig: (@Sendable () async -> ConfigLoadResult)?
    /// Serve MCP (`tokenrelay mcp`, SPEC §8) instead of tokenrelay's own methods: the same
    /// runtime, token manager and request path behind the MCP tools.
    public var mcp = false

    public init(
        framing: Framing? = nil, framingLimits: FramingLimits = FramingLimits(),
        dispatcherLimits: DispatcherLimits = DispatcherLimits(), gracePeriod: Duration = .seconds(10)
    ) {
        self.framing = framing
        self.framingLimits = framingLimits
        self.dispatcherLimits = dispatcherLimits
        self.gracePeriod = gracePeriod
    }
}

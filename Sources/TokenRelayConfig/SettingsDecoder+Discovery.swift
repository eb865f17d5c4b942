/// `discover: true` on an OAuth profile (SPEC §9): the authorization server, scopes and (for an
/// `authorization_code` profile without `client_id`) the client registration come from the
/// resource's own metadata.
public struct DiscoverySettings: Sendable, Equatable {
    /// Whether `resource` (RFC 8707) is sent (`resource_indicator`, default true).
    public var resourceIndicator: Bool
    /// Whether a `client_credentials` profile steps up on `insufficient_scope` (`step_up`).
    public var stepUp: Bool
    /// A Client ID Metadata Document URL used as the client id where the server supports them.
    public var clientMetadataURL: String?

    public init(resourceIndicator: Bool = true, stepUp: Bool = false, clientMetadataURL: String? = nil) {
        self.resourceIndicator = resourceIndicator
        self.stepUp = stepUp
        self.clientMetadataURL = clientMetadataURL
    }
}

extension SettingsDecoder {
    /// The discovery settings of an OAuth profile; `nil` without `discover: true`. `step_up` and
    /// `client_metadata_url` only mean something with it.
    mutating func decodeDiscovery(_ keys: Fields, path: String) -> DiscoverySettings? {
        let enabled = keys["discover"].flatMap { boolean($0.value, path: "\(path).discover") } ?? false
        var settings = DiscoverySettings()
        if let pair = keys["resource_indicator"],
            let value = boolean(pair.value, path: "\(path).resource_indicator")
        {
            settings.resourceIndicator = value
        }
        if let pair = keys["step_up"], let value = boolean(pair.value, path: "\(path).step_up") {
            settings.stepUp = value
            if !enabled { sink.error("'\(path).step_up' needs 'discover: true'", at: pair.key.mark) }
        }
        if let pair = keys["client_metadata_url"] {
            settings.clientMetadataURL = endpointURL(pair.value, path: "\(path).client_metadata_url")
            if !enabled { sink.error("'\(path).client_metadata_url' needs 'discover: true'", at: pair.key.mark) }
        }
        return enabled ? settings : nil
    }

    /// `resource_indicator: false` on a profile configured by hand: its `resource` is not sent.
    mutating func resourceIndicatorOff(_ keys: Fields, path: String) -> Bool {
        keys["resource_indicator"]?.value.scalar?.value.lowercased() == "false"
    }

    /// Whether the profile mapping `node` is of type `authorization_code`.
    func isAuthorizationCode(_ node: YAMLNode) -> Bool { profileType(node) == "authorization_code" }

    /// A profile node's `type`, as written.
    func profileType(_ node: YAMLNode) -> String? {
        node.pairs?.first { $0.key.scalar?.value == "type" }?.value.scalar?.value
    }
}

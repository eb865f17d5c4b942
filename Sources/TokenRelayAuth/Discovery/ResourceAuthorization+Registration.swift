import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging

extension ResourceAuthorization {
    /// The client registration to use with `issuer` (SPEC §9.4): the Client ID Metadata Document
    /// where configured and supported; else the one kept in the store; else a new Dynamic Client
    /// Registration (for `registering` scopes), made under the store's lease so that processes
    /// sharing the store register once. A kept registration that does not cover `scopes` (a
    /// step-up beyond it) is replaced.
    func registration(
        issuer: String, metadata: AuthorizationServerMetadata, redirectURIs: [String], scopes: [String],
        registering: [String], deadline: Date
    ) async throws -> ClientRegistration {
        if let url = template.clientMetadataURL, metadata.registration.clientIDMetadataDocumentSupported {
            return ClientRegistration(issuer: issuer, clientID: url, redirectURIs: redirectURIs)
        }
        guard let endpoint = metadata.registration.registrationEndpoint else {
            throw AuthError.configuration(
                "profile '\(profile)': the authorization server offers no registration; set client_id")
        }
        let store = manager.store
        if let stored = try await store.loadRegistration(issuer: issuer),
            stored.isUsable(at: clock.now, redirectURIs: redirectURIs, scopes: scopes)
        {
            return stored
        }
        let leaseKey = StoreKey(
            session: SessionKey(
                environment: "registration", profile: issuer,
                configuration: OAuthClientConfiguration(issuer: issuer, clientID: "registration")))
        let lease = try await store.acquireLease(
            leaseKey, purpose: .registration, deadline: deadline, expiresAt: deadline.addingTimeInterval(30))
        defer { store.releaseLease(lease) }
        // Another process may have registered while this one waited.
        if let stored = try await store.loadRegistration(issuer: issuer),
            stored.isUsable(at: clock.now, redirectURIs: redirectURIs, scopes: scopes)
        {
            return stored
        }
        let method = DynamicClientRegistration.authMethod(supported: metadata.tokenEndpointAuthMethodsSupported)
        let registration = try await DynamicClientRegistration.register(
            endpoint: endpoint, issuer: issuer, redirectURIs: redirectURIs, authMethod: method,
            supported: metadata.tokenEndpointAuthMethodsSupported, scopes: registering,
            transport: transport, timeout: .seconds(30))
        try await store.saveRegistration(registration)
        log.info("registered tokenrelay as a client of \(ServerText(issuer).value) for \(environment)/\(profile)")
        return registration
    }
}

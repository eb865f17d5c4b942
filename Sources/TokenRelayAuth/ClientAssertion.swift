import FoundationEssentials
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// `private_key_jwt` settings (RFC 7523 §2.2, OpenID Connect Core §9): the key that signs the
/// client's assertions and how they are addressed.
public struct ClientKey: Sendable {
    /// Which `aud` the assertion names.
    public enum Audience: String, Sendable, Hashable, CaseIterable {
        /// The token endpoint URL (RFC 7523 §3 point 3; what most servers check).
        case tokenEndpoint = "token_endpoint"
        /// The issuer identifier (servers that want it, as RFC 7523 allows).
        case issuer
    }

    /// The PEM private key (EC P-256, or RSA of at least 2048 bits), resolved for every flight.
    public var key: SecretProvider
    /// `ES256`, `RS256` or `PS256`; `nil`: ES256 for an EC key, RS256 for an RSA key.
    public var algorithm: String?
    /// The JWS `kid`, if the server needs one to pick the registered key.
    public var keyID: String?
    /// The `aud` of the assertions.
    public var audience: Audience

    /// Creates the settings.
    public init(
        key: SecretProvider, algorithm: String? = nil, keyID: String? = nil, audience: Audience = .tokenEndpoint
    ) {
        self.key = key
        self.algorithm = algorithm
        self.keyID = keyID
        self.audience = audience
    }

    /// The algorithms a client key may sign with.
    public static let algorithms = ["ES256", "RS256", "PS256"]
}

/// What the client authenticates with, resolved once per flight: a secret, or a key that signs a
/// fresh assertion for every request.
enum ClientCredential: Sendable {
    /// `client_secret_basic` / `client_secret_post`.
    case secret(String)
    /// `private_key_jwt`: the key, its algorithm and `kid`, and the assertions' `aud`.
    case key(JOSEPrivateKey, algorithm: String, keyID: String?, audience: String)
    /// `tls_client_auth` / `self_signed_tls_client_auth`: the certificate presented in the handshake.
    case certificate(ClientIdentity)
}

/// What is wrong with a client's key or certificate (SPEC §10): the setting and why, never a
/// value.
package struct ClientKeyProblem: Error, Sendable, Equatable {
    /// The setting at fault.
    package enum Setting: Sendable, Equatable {
        /// `client_key`.
        case clientKey
        /// `client_cert`.
        case clientCertificate
    }

    /// The setting at fault.
    package var setting: Setting
    /// Why, naming the setting (`client_key is not ...`).
    package var reason: String

    init(_ setting: Setting, _ reason: String) {
        self.setting = setting
        self.reason = reason
    }

    /// What a token request would find wrong with a client's key and certificate, given their
    /// resolved texts (`nil`: not resolved, a failure reported where it was resolved), read by the
    /// request's own code: `check-config --resolve-secrets` (SPEC §10). Empty when `clientAuth`
    /// uses neither.
    package static func problems(clientAuth: ClientAuthMethod, key: String?, algorithm: String?, certificate: String?)
        -> [ClientKeyProblem]
    {
        ClientCredential.problems(clientAuth: clientAuth, key: key, algorithm: algorithm, certificate: certificate)
    }
}

/// Compact JWS building (RFC 7515 §7.1) with a ``JOSEPrivateKey``. Pure but for the signature.
enum JWSBuilder {
    /// `BASE64URL(header) . BASE64URL(payload) . BASE64URL(signature)`; `nil` when signing failed.
    static func compact(header: JSONObject, payload: JSONObject, algorithm: String, key: JOSEPrivateKey) -> String? {
        let input =
            Base64URL.encode(JSONValue.object(header).serialized()) + "."
            + Base64URL.encode(JSONValue.object(payload).serialized())
        guard let signature = JOSESignature.sign(algorithm: algorithm, key: key, input: Array(input.utf8)) else {
            return nil
        }
        return input + "." + Base64URL.encode(signature)
    }

    /// A random `jti` (128 bits, base64url).
    static func randomID() throws(AuthError) -> String {
        guard let bytes = LibCrypto.randomBytes(16) else { throw .configuration("no random bytes from libcrypto") }
        return Base64URL.encode(bytes)
    }
}

extension ClientCredential {
    /// The lifetime of a client assertion (SPEC §10: at most 60 s).
    static let assertionLifetime: Int64 = 60

    /// A fresh client assertion (RFC 7523 §3): `iss` = `sub` = the client id, `aud`, a random
    /// `jti`, `iat` now and `exp` 60 s later. Registered with the redactor (a bearer credential
    /// until it expires).
    static func assertion(
        clientID: String, key: JOSEPrivateKey, algorithm: String, keyID: String?, audience: String, now: Date
    ) throws(AuthError) -> String {
        var header: JSONObject = ["alg": .string(algorithm), "typ": "JWT"]
        if let keyID { header["kid"] = .string(keyID) }
        let issuedAt = Int64(now.timeIntervalSince1970.rounded(.down))
        let payload: JSONObject = [
            "iss": .string(clientID), "sub": .string(clientID), "aud": .string(audience),
            "jti": .string(try JWSBuilder.randomID()), "iat": .number(JSONNumber(issuedAt)),
            "exp": .number(JSONNumber(issuedAt + assertionLifetime)),
        ]
        guard let jwt = JWSBuilder.compact(header: header, payload: payload, algorithm: algorithm, key: key) else {
            throw .configuration("client_key could not sign the client assertion with \(algorithm)")
        }
        Redactor.shared.registerToken(jwt)
        return jwt
    }

    /// Resolves `configuration`'s client authentication for requests whose token endpoint is
    /// `tokenEndpoint`: the secret, or the client key (checked to fit its algorithm). `nil` for a
    /// public client. A secret or key that cannot be read is a `config` error naming its key.
    static func resolve(_ configuration: OAuthClientConfiguration, tokenEndpoint: String) async throws
        -> ClientCredential?
    {
        switch configuration.clientAuth {
        case .none:
            return nil
        case .clientSecretBasic, .clientSecretPost:
            guard let provider = configuration.clientSecret else { return nil }
            return .secret(try await provider.resolve("the client secret"))
        case .privateKeyJWT:
            guard let settings = configuration.clientKey else {
                throw AuthError.configuration("client_auth private_key_jwt needs a client_key")
            }
            let key = try await readKey(settings.key, what: "client_key")
            let algorithm = try algorithm(for: key, configured: settings.algorithm)
            let audience: String
            switch settings.audience {
            case .tokenEndpoint: audience = tokenEndpoint
            case .issuer:
                guard let issuer = configuration.issuer else {
                    throw AuthError.configuration("client_assertion_audience: issuer needs an issuer")
                }
                audience = issuer
            }
            return .key(key, algorithm: algorithm, keyID: settings.keyID, audience: audience)
        case .tlsClientAuth, .selfSignedTLSClientAuth:
            return .certificate(try await identity(configuration))
        }
    }

    /// The client certificate and key of a mutual-TLS client (SPEC §10); a `config` error naming
    /// the key that cannot be read or is not what it must be.
    static func identity(_ configuration: OAuthClientConfiguration) async throws -> ClientIdentity {
        guard let certificate = configuration.clientCertificate, let keySettings = configuration.clientKey else {
            throw AuthError.configuration(
                "client_auth \(configuration.clientAuth.rawValue) needs a client_cert and a client_key")
        }
        let key = try await readKey(keySettings.key, what: "client_key")
        let text = try await certificate.resolve("client_cert")
        do {
            return try identity(certificatePEM: Array(text.utf8), key: key)
        } catch {
            throw AuthError.configuration(error.reason)
        }
    }

    /// The TLS identity of `certificatePEM` and `key`, both read by libcrypto as libcurl reads them
    /// in the handshake (the chain as `use_certificate_chain_blob` does, the key against the first
    /// certificate as `SSL_CTX_check_private_key` does), so that what the handshake would refuse is
    /// refused here, by its setting: at the first request, and by `check-config --resolve-secrets`.
    static func identity(certificatePEM: [UInt8], key: JOSEPrivateKey) throws(ClientKeyProblem) -> ClientIdentity {
        guard JOSESignature.kind(of: key) != nil else {
            throw ClientKeyProblem(.clientKey, "client_key is not a readable unencrypted PEM private key")
        }
        switch JOSESignature.certificateChain(certificatePEM, key: key) {
        case nil:
            throw ClientKeyProblem(.clientCertificate, "client_cert cannot be read: libcrypto.so.3 could not be loaded")
        case .unreadable?:
            throw ClientKeyProblem(.clientCertificate, "client_cert holds no readable PEM certificate")
        case .damaged?:
            throw ClientKeyProblem(
                .clientCertificate, "client_cert: a certificate after the first cannot be read (a damaged chain)")
        case .certificates(_, keyMatches: false)?:
            throw ClientKeyProblem(.clientKey, "client_key is not the private key of client_cert's certificate")
        case .certificates(_, keyMatches: true)?:
            return ClientIdentity(certificatePEM: certificatePEM, keyPEM: key.bytes)
        }
    }

    /// See ``ClientKeyProblem/problems(clientAuth:key:algorithm:certificate:)``.
    static func problems(clientAuth: ClientAuthMethod, key: String?, algorithm: String?, certificate: String?)
        -> [ClientKeyProblem]
    {
        switch clientAuth {
        case .privateKeyJWT:
            guard let key else { return [] }
            do {
                _ = try self.algorithm(
                    for: JOSEPrivateKey(bytes: Array(key.utf8), encoding: .pem), configured: algorithm)
                return []
            } catch {
                guard case .configuration(let reason) = error else { return [ClientKeyProblem(.clientKey, "\(error)")] }
                return [ClientKeyProblem(.clientKey, reason)]
            }
        case .tlsClientAuth, .selfSignedTLSClientAuth:
            guard let key, let certificate else { return [] }
            do {
                _ = try identity(
                    certificatePEM: Array(certificate.utf8), key: JOSEPrivateKey(bytes: Array(key.utf8), encoding: .pem)
                )
                return []
            } catch {
                return [error]
            }
        case .none, .clientSecretBasic, .clientSecretPost:
            return []
        }
    }

    /// Reads a PEM private key from `provider`; `what` names its config key in errors.
    static func readKey(_ provider: SecretProvider, what: String) async throws -> JOSEPrivateKey {
        let text = try await provider.resolve(what)
        Redactor.shared.registerToken(text)
        return JOSEPrivateKey(bytes: Array(text.utf8), encoding: .pem)
    }

    /// The algorithm `key` signs with: the configured one when it fits, else ES256 for P-256 and
    /// RS256 for RSA. An unreadable key, or one that fits no algorithm, is a `config` error.
    static func algorithm(for key: JOSEPrivateKey, configured: String?) throws(AuthError) -> String {
        guard let kind = JOSESignature.kind(of: key) else {
            throw .configuration("client_key is not a readable unencrypted PEM private key")
        }
        if let configured {
            guard JOSESignature.fits(configured, kind) else {
                throw .configuration("client_key does not fit client_key_alg \(configured)")
            }
            return configured
        }
        switch kind {
        case .p256: return "ES256"
        case .rsa(let bits) where bits >= 2048: return "RS256"
        default: throw .configuration("client_key must be an EC P-256 key or an RSA key of at least 2048 bits")
        }
    }
}

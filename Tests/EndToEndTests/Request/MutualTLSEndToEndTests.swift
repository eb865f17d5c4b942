import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// Mutual TLS (RFC 8705, SPEC §10) through the real binary: `client_auth: tls_client_auth` against
/// a loopback HTTPS token endpoint that authenticates the client by its certificate
/// (Fixtures/mtls_server.py), found through the metadata's `mtls_endpoint_aliases`; the tokens it
/// issues are bound to the certificate (`cnf` `x5t#S256`), and the API accepts one only with it.
@Suite struct MutualTLSEndToEndTests {
    /// A CA, a server certificate for 127.0.0.1 and a client certificate (CN mtls-client), made
    /// with the openssl command-line tool in a private directory.
    struct Certificates {
        let directory: URL
        var path: String { directory.path }

        static func make() async throws -> Certificates {
            let directory = try TestScratch.folder("tokenrelay-mtls")
            chmod(directory.path, 0o700)
            func openssl(_ arguments: [String]) async throws {
                let result = try await InteropStack.run(
                    "/usr/bin/openssl", arguments, in: directory, timeout: .seconds(60))
                guard result.status == 0 else {
                    throw InteropStack.Failure(description: "openssl \(arguments.first ?? "") failed: \(result.stderr)")
                }
            }
            let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
            func file(_ name: String) -> String { directory.appendingPathComponent(name).path }
            try await openssl(
                ["req", "-x509"] + ec
                    + [
                        "-keyout", file("ca.key"), "-out", file("ca.pem"), "-days", "2", "-subj",
                        "/CN=tokenrelay test CA",
                    ])
            try "subjectAltName=IP:127.0.0.1\n".write(toFile: file("server.ext"), atomically: true, encoding: .utf8)
            try "extendedKeyUsage=clientAuth\n".write(toFile: file("client.ext"), atomically: true, encoding: .utf8)
            for (name, subject) in [("server", "/CN=127.0.0.1"), ("client", "/CN=mtls-client")] {
                try await openssl(
                    ["req", "-new"] + ec
                        + ["-keyout", file("\(name).key"), "-out", file("\(name).csr"), "-subj", subject])
                try await openssl([
                    "x509", "-req", "-in", file("\(name).csr"), "-CA", file("ca.pem"), "-CAkey", file("ca.key"),
                    "-CAcreateserial", "-out", file("\(name).pem"), "-days", "2", "-extfile", file("\(name).ext"),
                ])
            }
            chmod(directory.appendingPathComponent("client.key").path, 0o600)
            return Certificates(directory: directory)
        }

        /// The client certificate's RFC 8705 thumbprint (base64url SHA-256 of its DER).
        func clientThumbprint() async throws -> String {
            let der = try await InteropStack.run(
                "/bin/sh",
                [
                    "-c", "openssl x509 -in \"$0\"/client.pem -outform DER | openssl dgst -sha256 -binary | base64",
                    path,
                ],
                in: directory, timeout: .seconds(60))
            return der.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }

        func ledger(_ event: String) throws -> [JSONValue] {
            let text =
                (try? String(contentsOf: directory.appendingPathComponent("ledger.jsonl"), encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }.filter {
                $0["event"]?.stringValue == event
            }
        }
    }

    @Test func aCertificateAuthenticatedClientGetsCertificateBoundTokensAndPresentsThemWithItsCertificate()
        async throws
    {
        let certificates = try await Certificates.make()
        defer { try? FileManager.default.removeItem(at: certificates.directory) }
        let script = RecordingServer.fixtures.appendingPathComponent("mtls_server.py").path
        let server = try await FixtureServer(
            script: script, [certificates.path, "mtls-client", "mtls-client"], words: 1)
        let origin = "https://127.0.0.1:\(server.ports[0])"
        let config = certificates.directory.appendingPathComponent("config.yaml")
        try """
        version: 1
        store: { type: memory }
        environments:
          api:
            base_url: \(origin)/resource
            ca_file: \(certificates.path)/ca.pem
            profiles:
              service:
                type: client_credentials
                issuer: \(origin)
                client_id: mtls-client
                client_auth: tls_client_auth
                client_cert: { file: \(certificates.path)/client.pem }
                client_key: { file: \(certificates.path)/client.key }
        """.write(to: config, atomically: true, encoding: .utf8)

        let relay = try RelayProcess(["--config", config.path, "--log-level", "trace"], testMethods: false)
        let got = try await relay.call("request", ["path": "/orders"])
        #expect(got["result"]?["status"]?.intValue == 200, "\(got.jsonText) \(relay.stderrText.suffix(1500))")
        let thumbprint = try await certificates.clientThumbprint()
        #expect(got["result"]?["json"]?["x5t"]?.stringValue == thumbprint)
        let posted = try await relay.call("request", ["method": "POST", "path": "/orders", "json": ["n": 1]])
        #expect(posted["result"]?["status"]?.intValue == 200, "\(posted.jsonText)")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)

        // One token, issued to the certificate, through the mTLS alias only; every API request
        // presented the certificate the token is bound to.
        #expect(try certificates.ledger("issued").map { $0["x5t"]?.stringValue } == [thumbprint])
        #expect(try certificates.ledger("refused").isEmpty)
        #expect(try certificates.ledger("resource_refused").isEmpty)
        #expect(try certificates.ledger("resource").count == 2)
        let key = try String(contentsOf: certificates.directory.appendingPathComponent("client.key"), encoding: .utf8)
        for line in pemBodyLines(key) {
            #expect(!relay.stdoutText.contains(line) && !relay.stderrText.contains(line))
        }
    }
}

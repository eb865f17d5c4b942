// swift-tools-version: 6.2
// 6.2: the first tools version whose packages may use unsafe flags (below) and still be used as a
// versioned dependency.
import PackageDescription

/// One target per concern; dependencies point one way:
/// C shims -> Platform -> ErrorKinds / Logging / HTTPFields -> JSONRPC / Config / HTTP -> Auth -> Server -> tokenrelay.
/// Platform owns threads, executors, where work runs (Placement) and the descriptor writer.
/// HTTPFields holds the header field rules both Config (at load) and HTTP (at send) apply;
/// ErrorKinds the wire error vocabulary every module's errors expose.
let package = Package(
    name: "tokenrelay",
    products: [
        .executable(name: "tokenrelay", targets: ["tokenrelay"]),
        // The library's one stable entry point is the TokenRelay module (TokenRelayClient); the
        // modules under it are built and linked with it but are not a stable API (README).
        .library(name: "TokenRelay", targets: ["TokenRelay"]),
    ],
    targets: [
        // C libraries from Debian, reached through pkg-config.
        .systemLibrary(name: "CYAML", path: "Sources/CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        // CCurl loads libcurl with dlopen on first use (Sources/CCurl/shim.h): no pkg-config link flags.
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // CCrypto loads libcrypto with dlopen on first use (Sources/CCrypto/shim.h), like CCurl.
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", providers: [.apt(["libssl-dev"])]),
        // CSQLite loads libsqlite3 with dlopen on first use (Sources/CSQLite/shim.h), like CCurl.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        // CPostgres loads libpq with dlopen on first use (Sources/CPostgres/shim.h), like CCurl: only a
        // config with a shared tier (store.shared) maps it.
        .systemLibrary(name: "CPostgres", path: "Sources/CPostgres", providers: [.apt(["libpq-dev"])]),
        // CSecret loads libsecret with dlopen on first use (Sources/CSecret/shim.h), like CCurl: only a
        // process that opens a store without a configured key maps it (the secret service's store key).
        .systemLibrary(name: "CSecret", path: "Sources/CSecret", providers: [.apt(["libsecret-1-0"])]),
        // CSystem shows the libc calls Swift's Glibc module does not (eventfd, pwritev2).
        .systemLibrary(name: "CSystem", path: "Sources/CSystem"),

        .target(name: "TokenRelayErrorKinds"),
        .target(name: "TokenRelayPlatform", dependencies: ["CSystem"]),
        .target(name: "TokenRelayLogging", dependencies: ["TokenRelayPlatform"]),
        .target(name: "TokenRelayHTTPFields"),
        .target(name: "TokenRelayJSONRPC", dependencies: ["TokenRelayErrorKinds", "TokenRelayLogging", "TokenRelayPlatform"]),
        .target(name: "TokenRelayConfig", dependencies: ["CYAML", "TokenRelayErrorKinds", "TokenRelayHTTPFields", "TokenRelayLogging", "TokenRelayPlatform"]),
        .target(name: "TokenRelayHTTP", dependencies: ["CCurl", "CSystem", "TokenRelayErrorKinds", "TokenRelayHTTPFields", "TokenRelayLogging", "TokenRelayPlatform"]),
        .target(
            name: "TokenRelayAuth",
            dependencies: [
                "TokenRelayHTTP", "TokenRelayHTTPFields", "TokenRelayJSONRPC", "CCrypto", "CSQLite", "CPostgres", "CSecret",
                "TokenRelayErrorKinds", "TokenRelayLogging", "TokenRelayPlatform",
            ]),
        .target(
            name: "TokenRelayServer", dependencies: ["TokenRelayJSONRPC", "TokenRelayConfig", "TokenRelayHTTP", "TokenRelayHTTPFields", "TokenRelayAuth", "TokenRelayErrorKinds", "TokenRelayLogging", "TokenRelayPlatform"]),
        // The command-line flows over the server's runtime: one-shot commands (call, token, login,
        // status, logout, invalidate, subscribe) and check-config.
        .target(
            name: "TokenRelayCommands",
            dependencies: ["TokenRelayServer", "TokenRelayConfig", "TokenRelayJSONRPC", "TokenRelayHTTP", "TokenRelayAuth", "TokenRelayLogging", "TokenRelayPlatform"]),
        // The library's public face: a small client over Relay's runtime (RelaySession, @_spi).
        .target(name: "TokenRelay", dependencies: ["TokenRelayServer", "TokenRelayConfig", "TokenRelayJSONRPC"]),
        // The release binary exports no symbols of its own: libcurl's dependency tree (dlopen'ed
        // on first use, ~30 libraries bound at once) then resolves its symbols without searching
        // the executable's table first (scripts/bench.d/FINDINGS.md). A statically linked Swift
        // runtime (`--static-swift-stdlib`) would otherwise export every symbol of our modules.
        .executableTarget(
            name: "tokenrelay",
            dependencies: [
                "TokenRelayCommands", "TokenRelayServer", "TokenRelayJSONRPC", "TokenRelayConfig", "TokenRelayHTTP", "TokenRelayHTTPFields", "TokenRelayAuth", "CSystem", "TokenRelayErrorKinds", "TokenRelayLogging", "TokenRelayPlatform",
            ],
            linkerSettings: [.unsafeFlags(["-Xlinker", "--no-export-dynamic"], .when(configuration: .release))]),

        // What the test targets share: the fixture server launcher, Fixtures/fixture_server.py and
        // the event-stream helpers (an events server, a recording sleep, collecting an EventSource).
        // Not part of any product.
        .target(name: "TestSupport", dependencies: ["TokenRelayHTTP"], path: "Tests/TestSupport", exclude: ["Fixtures"]),

        .testTarget(name: "PlatformTests", dependencies: ["TokenRelayPlatform"]),
        .testTarget(name: "LoggingTests", dependencies: ["TokenRelayLogging", "TokenRelayPlatform"]),
        .testTarget(name: "JSONRPCTests", dependencies: ["TokenRelayJSONRPC", "TokenRelayPlatform"]),
        .testTarget(name: "ConfigTests", dependencies: ["TokenRelayConfig", "TokenRelayHTTPFields", "TokenRelayLogging", "TestSupport"]),
        .testTarget(name: "HTTPTests", dependencies: ["TokenRelayHTTP", "TokenRelayHTTPFields", "TokenRelayErrorKinds", "TokenRelayLogging", "TokenRelayPlatform", "TestSupport"]),
        // The tests make keys and signatures with libcrypto directly: they link it.
        .testTarget(
            name: "AuthTests",
            dependencies: ["TokenRelayAuth", "TokenRelayHTTP", "TokenRelayLogging", "TokenRelayPlatform", "CCrypto", "CCurl", "CSQLite", "TokenRelayErrorKinds", "TestSupport"],
            linkerSettings: [.linkedLibrary("crypto")]),
        .testTarget(name: "RelayTests", dependencies: ["TokenRelayServer", "TokenRelayJSONRPC", "TokenRelayConfig", "TokenRelayHTTP", "TokenRelayAuth", "TokenRelayErrorKinds", "TokenRelayPlatform"]),
        .testTarget(name: "CommandsTests", dependencies: ["TokenRelayCommands", "TokenRelayServer", "TokenRelayConfig", "TokenRelayJSONRPC", "TokenRelayHTTP", "TokenRelayLogging", "TokenRelayPlatform", "TestSupport"]),
        .testTarget(name: "TokenRelayTests", dependencies: ["TokenRelay", "TestSupport"]),
        .testTarget(name: "EndToEndTests", dependencies: ["TokenRelayJSONRPC", "TestSupport"], exclude: ["Fixtures"]),
    ],
    swiftLanguageModes: [.v6]
)

// Developer targets: the fuzzers and the benchmark driver. Declared only when
// TOKENRELAY_DEV_TARGETS=1 (set by scripts/fuzz, scripts/bench and scripts/test), so a user's
// `swift build` compiles the product, its libraries and the tests, nothing else.
if Context.environment["TOKENRELAY_DEV_TARGETS"] == "1" {
    package.targets += [
        // Fuzz targets: built with `-sanitize=fuzzer -DFUZZING` by scripts/fuzz; otherwise each
        // replays the files named on its command line. FuzzSupport is the libFuzzer glue they share.
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzFraming", dependencies: ["FuzzSupport", "TokenRelayJSONRPC"]),
        .executableTarget(name: "FuzzConfig", dependencies: ["FuzzSupport", "TokenRelayConfig"]),
        .executableTarget(name: "FuzzSSE", dependencies: ["FuzzSupport", "TokenRelayHTTP"]),
        .executableTarget(name: "FuzzTokenResponse", dependencies: ["FuzzSupport", "TokenRelayAuth", "TokenRelayHTTP", "TokenRelayLogging"]),
        .executableTarget(name: "FuzzJOSE", dependencies: ["FuzzSupport", "TokenRelayAuth"]),
        .executableTarget(name: "FuzzRequestHead", dependencies: ["FuzzSupport", "TokenRelayHTTP", "TokenRelayServer"]),

        // Benchmarks (scripts/bench): the load driver with its libcurl and URLSession references
        // (the only target allowed to import FoundationNetworking), and the two bare binaries the
        // cold start is compared with: one importing Foundation, one FoundationEssentials (what
        // tokenrelay's modules import).
        .executableTarget(
            name: "TokenRelayBench", dependencies: ["CCurl", "TokenRelayLogging", "TokenRelayPlatform"], linkerSettings: [.linkedLibrary("curl")]),
        .executableTarget(name: "BareFoundationEcho"),
        .executableTarget(name: "BareEssentialsEcho"),
    ]
}

// Every Swift target reaches concrete generic type metadata (a `[String: String]`'s storage, a
// `Set<Origin>`) through direct accessor calls instead of by mangled name. The mangled-name path
// demangles the type at first use and proves each generic requirement (`String: Hashable`) by a
// linear scan of the binary's protocol conformance records, on every start's path (measured:
// scripts/bench.d/FINDINGS.md §10).
for target in package.targets where target.type != .system {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .unsafeFlags(["-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors"]),
            .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
        ]
}

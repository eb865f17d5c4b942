// swift-tools-version: 6.2
import PackageDescription

// Depends on tokenrelay by version, as any program would. CI (scripts/test-example) points it at
// a tagged clone of the checkout: TOKENRELAY_PACKAGE_URL=file:///tmp/.../tokenrelay and
// TOKENRELAY_PACKAGE_VERSION=99.0.0.
let url = Context.environment["TOKENRELAY_PACKAGE_URL"] ?? "https://github.com/tokenrelay/tokenrelay.git"
let version = Version(Context.environment["TOKENRELAY_PACKAGE_VERSION"] ?? "0.1.0") ?? "0.1.0"

let package = Package(
    name: "AuthenticatedRequest",
    dependencies: [
        .package(url: url, from: version)
    ],
    targets: [
        .executableTarget(
            name: "AuthenticatedRequest",
            dependencies: [.product(name: "TokenRelay", package: "tokenrelay")])
    ],
    swiftLanguageModes: [.v6]
)

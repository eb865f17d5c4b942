/// The names and types of the configured environments and profiles (never URLs or secrets),
/// as `initialize` lists them.
public struct EnvironmentCatalog: Sendable {
    public struct Profile: Sendable {
        public var name: String
        public var type: String
        public init(name: String, type: String) {
            self.name = name
            self.type = type
        }
    }

    public struct Environment: Sendable {
        public var name: String
        public var isDefault: Bool
        public var profiles: [Profile]
        public init(name: String, isDefault: Bool, profiles: [Profile]) {
            self.name = name
            self.isDefault = isDefault
            self.profiles = profiles
        }
    }

    public var environments: [Environment]

    public init(environments: [Environment] = []) {
        self.environments = environments
    }
}

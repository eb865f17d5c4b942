import Foundation
import TestSupport
import Testing

@testable import TokenRelayConfig

/// The JSON Schema and the Swift decoder must accept exactly the same keys at every level.
@Suite struct SchemaAgreementTests {
    let schema: [String: Any]
    let definitions: [String: Any]

    init() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/schemas/config.schema.json"))
        schema = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        definitions = try #require(schema["$defs"] as? [String: Any])
    }

    /// The property names of a schema object.
    func keys(_ object: Any?) -> Set<String> {
        Set(((object as? [String: Any])?["properties"] as? [String: Any])?.keys.map { $0 } ?? [])
    }

    /// The definition a `$ref` points at.
    func resolve(_ object: Any?) -> [String: Any]? {
        guard let reference = (object as? [String: Any])?["$ref"] as? String else { return object as? [String: Any] }
        return definitions[String(reference.dropFirst("#/$defs/".count))] as? [String: Any]
    }

    @Test(arguments: ["server", "store", "shared", "environment", "events", "mcp", "exec"])
    func definitionKeysMatchTheDecoder(level: String) throws {
        let expected = try #require(ConfigLoader.knownKeyTables[level])
        #expect(keys(definitions[level]) == expected, "schema vs decoder differ at \(level)")
        #expect((definitions[level] as? [String: Any])?["additionalProperties"] as? Bool == false)
    }

    @Test func topLevelKeysMatchTheDecoder() {
        #expect(keys(schema) == ConfigLoader.knownKeyTables["top"])
        #expect(schema["additionalProperties"] as? Bool == false)
    }

    @Test func secretSourceKeysMatchTheDecoder() throws {
        let variants = try #require((definitions["secretSource"] as? [String: Any])?["oneOf"] as? [Any])
        let union = variants.reduce(into: Set<String>()) { $0.formUnion(keys($1)) }
        #expect(union == ConfigLoader.knownKeyTables["secret"])
    }

    @Test func everyProfileTypeHasTheDecodersKeys() throws {
        let variants = try #require((definitions["profile"] as? [String: Any])?["oneOf"] as? [Any])
        var seen: Set<String> = []
        for variant in variants {
            let definition = try #require(resolve(variant))
            let type = try #require(
                ((definition["properties"] as? [String: Any])?["type"] as? [String: Any])?["const"] as? String)
            seen.insert(type)
            let expected = ConfigLoader.knownKeyTables["profile.\(type)"]
            #expect(keys(definition) == expected, "schema vs decoder differ for profile type \(type)")
            #expect(definition["additionalProperties"] as? Bool == false)
        }
        #expect(seen == Set(SettingsDecoder.profileTypes))
        let tables = Set(
            ConfigLoader.knownKeyTables.keys.filter { $0.hasPrefix("profile.") }.map { String($0.dropFirst(8)) })
        #expect(seen == tables)
    }
}

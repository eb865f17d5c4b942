import JSONRPC

/// The OpenRPC document `rpc.discover` returns: the same text as schemas/openrpc.json
/// (a test keeps them identical; `scripts/embed-openrpc` regenerates this file).
public enum OpenRPCDocument {
    public static func value() throws -> JSONValue {
        try JSONParser.parse(text)
    }

    public static let text = #"""
        {}
        """#
}

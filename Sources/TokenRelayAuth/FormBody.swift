import FoundationEssentials
import TokenRelayHTTP

/// An `application/x-www-form-urlencoded` body (RFC 6749 Appendix B): fields in order, repeated
/// names allowed. The encoding itself is HTTP's ``FormEncoding``.
struct FormBody: Sendable, Equatable {
    /// The fields in order.
    private(set) var fields: [(name: String, value: String)] = []

    static func == (lhs: FormBody, rhs: FormBody) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    /// Appends one field.
    mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    /// The encoded body text.
    var encoded: String { FormEncoding.encode(fields.map { ($0.name, $0.value) }) }

    /// The encoded body bytes.
    var bytes: [UInt8] { Array(encoded.utf8) }

    /// Encodes one name or value: as a form field (space as `+`), or as a query component.
    static func encode(_ text: String, spaceAsPlus: Bool = true) -> String {
        spaceAsPlus ? FormEncoding.encodeComponent(text) : RequestURL.queryComponent(text)
    }

    /// The `Authorization` value for `client_secret_basic` (RFC 6749 §2.3.1): the id and secret
    /// are form-encoded first, then `id:secret` is base64-encoded.
    static func basicAuthorization(clientID: String, secret: String) -> String {
        let pair = "\(encode(clientID)):\(encode(secret))"
        return "Basic " + Data(pair.utf8).base64EncodedString()
    }
}

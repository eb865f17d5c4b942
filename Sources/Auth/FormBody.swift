import Foundation

/// An `application/x-www-form-urlencoded` body (RFC 6749 Appendix B): fields in order, repeated
/// names allowed. Private to Auth; the HTTP module has its own public helper.
struct FormBody: Sendable, Equatable {
    /// The fields in order.
    private(set) var fields: [(name: String, value: String)] = []

    static func == (lhs: FormBody, rhs: FormBody) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    /// Appends one field.
    mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    /// The encoded body text.
    var encoded: String {
        fields.map { "\(Self.encode($0.name))=\(Self.encode($0.value))" }.joined(separator: "&")
    }

    /// The encoded body bytes.
    var bytes: [UInt8] { Array(encoded.utf8) }

    /// Form-encodes one name or value: ALPHA / DIGIT / `*-._` kept, space as `+`, every other
    /// UTF-8 byte as `%XX` (upper case).
    static func encode(_ text: String, spaceAsPlus: Bool = true) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "*"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"):
                output.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " ") where spaceAsPlus:
                output.append("+")
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                output.append("%")
                output.unicodeScalars.append(Unicode.Scalar(hex[Int(byte >> 4)]))
                output.unicodeScalars.append(Unicode.Scalar(hex[Int(byte & 0x0f)]))
            }
        }
        return output
    }

    /// The `Authorization` value for `client_secret_basic` (RFC 6749 §2.3.1): the id and secret
    /// are form-encoded first, then `id:secret` is base64-encoded.
    static func basicAuthorization(clientID: String, secret: String) -> String {
        let pair = "\(encode(clientID)):\(encode(secret))"
        return "Basic " + Data(pair.utf8).base64EncodedString()
    }
}

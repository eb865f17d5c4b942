import Testing

@testable import TokenRelayPlatform

/// ``DescriptorWriter``: what it keeps while bytes wait in its queue. (Its writing is tested
/// through its two users: `StdioWriterTests` and `LogWriterTests`.)
@Suite struct DescriptorWriterTests {
    static func message(_ byte: UInt8, count: Int) -> [UInt8] { [UInt8](repeating: byte, count: count) }

    @Test func queuedBytesAreStoredAtTheirOwnSize() {
        var roomy: [UInt8] = []
        roomy.reserveCapacity(4096)
        roomy += Self.message(0x61, count: 100)
        let compact = DescriptorWriter.exactlySized(roomy)
        #expect(compact == roomy)
        #expect(compact.capacity < 200)
        let tight = Self.message(0x62, count: 1000)
        #expect(DescriptorWriter.exactlySized(tight) == tight)
        let rest = DescriptorWriter.exactlySized(roomy, from: 60)
        #expect(rest == Self.message(0x61, count: 40))
        #expect(rest.capacity < 100)
    }
}

import Testing

@testable import TokenRelayHTTP

@Suite struct ParsedURLCacheTests {
    @Test func aURLParsedAgainIsTheKeptParseAndEqualsAFreshOne() throws {
        let cache = ParsedURLCache()
        let first = try cache.parse("http://127.0.0.1:8080/a/../b?q=1")
        let again = try cache.parse("http://127.0.0.1:8080/a/../b?q=1")
        #expect(again.handle === first.handle, "the kept parse, not a second one")
        let fresh = try ParsedURL("http://127.0.0.1:8080/a/../b?q=1")
        #expect(again == fresh)
        #expect(
            (again.text, again.origin, again.path, again.query) == (fresh.text, fresh.origin, fresh.path, fresh.query))
        #expect(cache.count == 1)
    }

    @Test func refusalsAreNotKeptAndSayWhyEachTime() {
        let cache = ParsedURLCache()
        for _ in 0..<2 {
            #expect(throws: URLProblem.userInfo) { try cache.parse("https://user:secret@example.com/") }
        }
        #expect(cache.count == 0)
    }

    @Test func itNeverHoldsMoreThanItsCapacity() throws {
        let cache = ParsedURLCache(capacity: 4)
        for index in 0..<10 {
            _ = try cache.parse("https://example.com/\(index)")
            #expect(cache.count <= 4)
        }
        // The latest is kept after the cache was emptied to make room.
        let latest = try cache.parse("https://example.com/9")
        #expect(try cache.parse("https://example.com/9").handle === latest.handle)
    }

    @Test func aLongURLIsParsedButNotKept() throws {
        let cache = ParsedURLCache(maximumLength: 100)
        let long = "https://example.com/" + String(repeating: "a", count: 100)
        let first = try cache.parse(long)
        #expect(try cache.parse(long).handle !== first.handle)
        #expect(first == (try ParsedURL(long)))
        #expect(cache.count == 0)
    }
}

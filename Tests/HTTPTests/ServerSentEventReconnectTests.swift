import Testing

@testable import TokenRelayHTTP

/// A random source that always returns the same word: 0 gives jitter 0, `UInt64.max` the largest jitter.
struct ConstantRandom: RandomNumberGenerator {
    var word: UInt64
    mutating func next() -> UInt64 { word }
}

/// SplitMix64: a small seeded generator, so jitter tests are repeatable.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct ServerSentEventReconnectTests {
    private static func delays(_ policy: inout EventStreamReconnectPolicy, count: Int, word: UInt64 = 0) -> [Int] {
        var random = ConstantRandom(word: word)
        return (0..<count).map { _ in policy.nextAttempt(using: &random).delayMilliseconds }
    }

    @Test func delaysDoubleFromOneSecondUpToTheCapWithoutJitter() {
        var policy = EventStreamReconnectPolicy()
        #expect(Self.delays(&policy, count: 8) == [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000])
        #expect(policy.attempt == 8)
    }

    @Test func attemptsAreNumberedFromOne() {
        var policy = EventStreamReconnectPolicy()
        var random = ConstantRandom(word: 0)
        let first = policy.nextAttempt(using: &random)
        let second = policy.nextAttempt(using: &random)
        #expect(first.attempt == 1)
        #expect(second.attempt == 2)
    }

    @Test func serverRetryIsTheBaseOfTheDoubling() {
        var policy = EventStreamReconnectPolicy()
        policy.serverRequestedRetry(milliseconds: 3_000)
        #expect(Self.delays(&policy, count: 6) == [3_000, 6_000, 12_000, 24_000, 30_000, 30_000])
    }

    @Test func retryChangedMidSequenceAppliesToTheNextDelay() {
        var policy = EventStreamReconnectPolicy()
        #expect(Self.delays(&policy, count: 2) == [1_000, 2_000])
        policy.serverRequestedRetry(milliseconds: 500)
        #expect(Self.delays(&policy, count: 2) == [2_000, 4_000])  // attempts 3 and 4 from a 500 ms base
    }

    @Test func serverRetryAboveTheCapIsHonouredWithoutDoubling() {
        var policy = EventStreamReconnectPolicy(serverRetryMilliseconds: 60_000)
        #expect(Self.delays(&policy, count: 3) == [60_000, 60_000, 60_000])
    }

    @Test func zeroRetryIsRaisedToTheFloor() {
        var policy = EventStreamReconnectPolicy()
        policy.serverRequestedRetry(milliseconds: 0)
        #expect(Self.delays(&policy, count: 3) == [100, 200, 400])
    }

    @Test func deliveredEventResetsTheAttempts() {
        var policy = EventStreamReconnectPolicy()
        _ = Self.delays(&policy, count: 4)
        policy.connectionDeliveredEvent()
        #expect(policy.attempt == 0)
        #expect(Self.delays(&policy, count: 2) == [1_000, 2_000])
    }

    @Test func fullJitterShortensByExactlyTwentyPercent() {
        let policy = EventStreamReconnectPolicy()
        let delays = (1...7).map { policy.delayMilliseconds(forAttempt: $0, jitter: 1) }
        #expect(delays == [800, 1_600, 3_200, 6_400, 12_800, 24_000, 24_000])
    }

    @Test func largestRandomJitterStaysAboveEightyPercent() {
        var policy = EventStreamReconnectPolicy()
        let delays = Self.delays(&policy, count: 7, word: .max)
        let nominal = [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]
        for (delay, full) in zip(delays, nominal) {
            #expect(delay < full)
            #expect(delay * 5 >= full * 4)
        }
    }

    @Test func seededJitterStaysWithinBounds() {
        var policy = EventStreamReconnectPolicy()
        var random = SeededRandom(state: 42)
        var shortened = 0
        for _ in 0..<500 {
            let (attempt, delay) = policy.nextAttempt(using: &random)
            let nominal = policy.nominalDelayMilliseconds(forAttempt: attempt)
            #expect(delay <= nominal)
            #expect(delay * 5 >= nominal * 4)
            if delay < nominal { shortened += 1 }
            if attempt == 10 { policy.connectionDeliveredEvent() }
        }
        #expect(shortened > 400)  // jitter is actually applied
    }

    @Test func jitterCanBeSwitchedOff() {
        var policy = EventStreamReconnectPolicy(maximumJitterFraction: 0)
        #expect(Self.delays(&policy, count: 3, word: .max) == [1_000, 2_000, 4_000])
    }

    @Test func hugeAttemptCountsStayAtTheCap() {
        let policy = EventStreamReconnectPolicy(serverRetryMilliseconds: .max / 2)
        #expect(policy.nominalDelayMilliseconds(forAttempt: 1_000) == .max / 2)
        #expect(EventStreamReconnectPolicy().nominalDelayMilliseconds(forAttempt: .max) == 30_000)
        #expect(EventStreamReconnectPolicy().delayMilliseconds(forAttempt: 1, jitter: .nan) == 1_000)
    }
}

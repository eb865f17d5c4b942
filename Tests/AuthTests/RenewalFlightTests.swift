import Foundation
import Testing

@testable import TokenRelayAuth

/// The flight's decisions (``RenewalFlight``) on their own: no store, no network, no clock.
@Suite struct RenewalFlightTests {
    typealias Snapshot = RenewalFlight.Snapshot

    static let token = Token(
        accessToken: "at-stored", receivedAt: Date(timeIntervalSince1970: 0), expiresAt: nil, version: 1)
    static let person = RenewalFlight(profile: "person", scopes: ["openid", "read"], origin: .login)
    static let seeded = RenewalFlight(profile: "seeded", scopes: [], origin: .seed)
    static let machine = RenewalFlight(profile: "machine", scopes: [], origin: .ownGrant)
    static let everyOrigin = [person, seeded, machine]

    /// One row of a decision's table.
    struct Row<Answer: Sendable>: Sendable, CustomTestStringConvertible {
        let name: String
        let flight: RenewalFlight
        let session: Snapshot
        let answer: Answer
        var testDescription: String { name }
    }

    // MARK: Where a session's token comes from

    @Test(arguments: [
        (Grant.clientCredentials, RenewalFlight.Origin.ownGrant),
        (.jwtBearer(.secret(.value("assertion"))), .ownGrant),
        (.refreshToken(seed: .value("rt-seed")), .seed),
        (
            .interactive(InteractiveLogin(flow: .deviceCode, deviceAuthorizationURL: "https://as.example/device")),
            .login
        ),
    ])
    func theOriginFollowsTheGrant(grant: Grant, origin: RenewalFlight.Origin) {
        let configuration = OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: "app", scopes: ["read", "openid"], grant: grant)
        let key = SessionKey(environment: "dev", profile: "p", configuration: configuration)
        #expect(
            RenewalFlight(key, grant: grant) == RenewalFlight(profile: "p", scopes: ["openid", "read"], origin: origin))
    }

    // MARK: Before the lease

    static let beforeLease: [Row<RenewalFlight.BeforeLease>] = [
        Row(
            name: "its own first read found a usable token: used, nothing sent", flight: machine,
            session: Snapshot(usableToken: token), answer: .useStored(token)),
        Row(
            name: "a read ahead that no caller joined ends after its read", flight: machine,
            session: Snapshot(callers: false), answer: .endRead),
        Row(
            name: "a read ahead ends before a person's session asks for a login", flight: person,
            session: Snapshot(callers: false), answer: .endRead),
        Row(
            name: "a person's session without a refresh token needs a login, with nothing sent", flight: person,
            session: Snapshot(),
            answer: .fail(.loginRequired("profile 'person' needs a person to log in", scopes: ["openid", "read"]))),
        Row(
            name: "a person's session with a refresh token takes the lease", flight: person,
            session: Snapshot(refreshToken: "rt-1"), answer: .takeLease),
        Row(
            name: "a seeded session without a refresh token takes the lease", flight: seeded, session: Snapshot(),
            answer: .takeLease),
        Row(
            name: "a machine's session takes the lease", flight: machine, session: Snapshot(), answer: .takeLease),
    ]

    @Test(arguments: beforeLease)
    func afterItsFirstRead(row: Row<RenewalFlight.BeforeLease>) {
        #expect(row.flight.beforeLease(row.session, justRead: true) == row.answer)
    }

    @Test func aSessionReadBeforeTheFlightIsRenewedUnderTheLeaseNotAnsweredFromMemory() {
        // Its callers found no usable token before they joined; the lease decides again after reading the store.
        #expect(Self.machine.beforeLease(Snapshot(usableToken: Self.token), justRead: false) == .takeLease)
        #expect(Self.machine.beforeLease(Snapshot(callers: false), justRead: false) == .endRead)
    }

    // MARK: Under the lease

    @Test(arguments: [RenewalFlight.LeaseProgress.tookLease, .reread, .committedUnsaved])
    func logoutWinsUnderTheLease(after progress: RenewalFlight.LeaseProgress) {
        let session = Snapshot(
            loggedOut: true, usableToken: Self.token, refreshToken: "rt-1", unsavedRotation: true,
            interactionRequired: true, lastError: .interactionRequired("refused"))
        for flight in Self.everyOrigin {
            #expect(flight.underLease(session, after: progress) == .fail(.loggedOut))
        }
    }

    static let underLease: [(RenewalFlight.LeaseProgress, Row<RenewalFlight.UnderLease>)] = [
        (
            .tookLease,
            Row(
                name: "the store is read again under the lease, even with a usable token in memory", flight: machine,
                session: Snapshot(usableToken: token, unsavedRotation: true), answer: .reread)
        ),
        (
            .reread,
            Row(
                name: "an unsaved rotation is committed before anything else, a usable token included",
                flight: seeded, session: Snapshot(usableToken: token, refreshToken: "rt-2", unsavedRotation: true),
                answer: .commitUnsaved)
        ),
        (
            .committedUnsaved,
            Row(
                name: "an unsaved rotation is committed once per flight", flight: seeded,
                session: Snapshot(refreshToken: "rt-2", unsavedRotation: true), answer: .renew)
        ),
        (
            .committedUnsaved,
            Row(
                name: "the committed rotation's token is used", flight: seeded,
                session: Snapshot(usableToken: token, refreshToken: "rt-2"), answer: .useStored(token))
        ),
        (
            .reread,
            Row(
                name: "a token another process renewed meanwhile is used", flight: machine,
                session: Snapshot(usableToken: token), answer: .useStored(token))
        ),
        (
            .reread,
            Row(
                name: "a usable token is used even after a refusal", flight: person,
                session: Snapshot(usableToken: token, interactionRequired: true), answer: .useStored(token))
        ),
        (
            .reread,
            Row(
                name: "a refused session stays refused, with the error that said so", flight: person,
                session: Snapshot(interactionRequired: true, lastError: .loginRequired("refused earlier")),
                answer: .fail(.loginRequired("refused earlier")))
        ),
        (
            .reread,
            Row(
                name: "a refused session without a recorded error says the refresh token was refused",
                flight: seeded, session: Snapshot(interactionRequired: true),
                answer: .fail(.interactionRequired("the refresh token was refused")))
        ),
        (
            .reread,
            Row(
                name: "nothing usable: renew", flight: machine, session: Snapshot(refreshToken: "rt-1"),
                answer: .renew)
        ),
    ]

    @Test(arguments: underLease)
    func underTheLease(progress: RenewalFlight.LeaseProgress, row: Row<RenewalFlight.UnderLease>) {
        #expect(row.flight.underLease(row.session, after: progress) == row.answer)
    }

    // MARK: What a renewal sends

    @Test func aHeldRefreshTokenIsSentWhateverTheOrigin() {
        for flight in Self.everyOrigin {
            #expect(flight.renewal(Snapshot(refreshToken: "rt-1")) == .send(.refresh("rt-1")))
        }
    }

    @Test func withoutARefreshTokenTheOriginDecides() {
        #expect(Self.seeded.renewal(Snapshot()) == .checkSeed)
        #expect(Self.machine.renewal(Snapshot()) == .send(.ownGrant))
        #expect(
            Self.person.renewal(Snapshot())
                == .fail(.loginRequired("profile 'person' needs a person to log in", scopes: ["openid", "read"])))
    }

    @Test func aSeedIsSentOnceOnly() {
        #expect(Self.seeded.sending(seed: "rt-seed", spent: false) == .success(.seed("rt-seed")))
        #expect(
            Self.seeded.sending(seed: "rt-seed", spent: true)
                == .failure(.interactionRequired("the configured refresh token was already used; provision a new one")))
    }

    @Test func whatARequestSpends() {
        #expect(RenewalFlight.Send.refresh("rt-1").refreshToken == "rt-1")
        #expect(RenewalFlight.Send.seed("rt-seed").refreshToken == "rt-seed")
        #expect(RenewalFlight.Send.ownGrant.refreshToken == nil)
    }

    // MARK: A refused refresh token

    @Test func logoutWinsOverARefusal() {
        for flight in Self.everyOrigin {
            #expect(flight.refused(Snapshot(loggedOut: true, refreshToken: "rt-1")) == .fail(.loggedOut))
        }
    }

    @Test func aRefusalFallsBackToTheOwnGrantOrNeedsInteraction() {
        #expect(Self.machine.refused(Snapshot(refreshToken: "rt-1")) == .fallBackToOwnGrant)
        #expect(
            Self.person.refused(Snapshot(refreshToken: "rt-1"))
                == .requireInteraction(.loginRequired("the refresh token was refused (invalid_grant)")))
        #expect(
            Self.seeded.refused(Snapshot(callers: false))
                == .requireInteraction(.interactionRequired("the refresh token was refused (invalid_grant)")))
    }

    // MARK: An answer

    @Test(arguments: [RenewalFlight.Send.refresh("rt-1"), .seed("rt-seed"), .ownGrant])
    func logoutWinsOverAnAnswer(sent: RenewalFlight.Send) {
        #expect(Self.seeded.answered(sent, Snapshot(loggedOut: true)) == .revokeAndFail(.loggedOut))
    }

    @Test func aRotatedRefreshTokenOnceSentIsCommittedEvenWhenEveryCallerLeft() {
        for callers in [true, false] {
            let session = Snapshot(callers: callers, refreshToken: "rt-1")
            #expect(Self.person.answered(.refresh("rt-1"), session) == .commit(replacing: "rt-1"))
            #expect(Self.seeded.answered(.seed("rt-seed"), session) == .commit(replacing: "rt-seed"))
            #expect(Self.machine.answered(.ownGrant, session) == .commit(replacing: nil))
        }
    }

    // MARK: A commit (the answer's and an unsaved rotation's: one rule)

    static let storeDown = AuthError.storage("the new tokens could not be committed")

    /// One row of the commit's table: what is committed, how the store took it, whether the session was logged out
    /// in this process meanwhile, and the decision.
    struct CommitRow: Sendable, CustomTestStringConvertible {
        let name: String
        let what: RenewalFlight.Committing
        let save: RenewalFlight.Save
        let loggedOut: Bool
        let answer: RenewalFlight.Commit
        var testDescription: String { name }
    }

    static let commits: [CommitRow] = [
        CommitRow(
            name: "a saved answer is adopted", what: .answer(rotates: true), save: .saved(7), loggedOut: false,
            answer: .adopt(7)),
        CommitRow(
            name: "a saved unsaved rotation is adopted", what: .unsavedRotation(held: true), save: .saved(8),
            loggedOut: false, answer: .adopt(8)),
        CommitRow(
            name: "a rotated refresh token, once sent, is kept in memory when the store fails",
            what: .answer(rotates: true), save: .failed(storeDown), loggedOut: false, answer: .keepUnsaved(storeDown)),
        CommitRow(
            name: "an unsaved rotation stays kept when the store fails again", what: .unsavedRotation(held: true),
            save: .failed(storeDown), loggedOut: false, answer: .keepUnsaved(storeDown)),
        CommitRow(
            name: "an unsaved rotation another path settled is still kept when the store fails",
            what: .unsavedRotation(held: false), save: .failed(storeDown), loggedOut: false,
            answer: .keepUnsaved(storeDown)),
        CommitRow(
            name: "an answer that rotated nothing keeps the held refresh token when the store fails",
            what: .answer(rotates: false), save: .failed(storeDown), loggedOut: false,
            answer: .keepRefreshToken(storeDown)),
        CommitRow(
            name: "logout in another process wins over an answer: forgotten and revoked", what: .answer(rotates: true),
            save: .refusedAfterLogout, loggedOut: false, answer: .forgetAndRevoke),
        CommitRow(
            name: "logout in another process wins over an unsaved rotation: forgotten and revoked",
            what: .unsavedRotation(held: true), save: .refusedAfterLogout, loggedOut: false,
            answer: .forgetAndRevoke),
        CommitRow(
            name: "logout here during the save wins over a saved answer: revoked", what: .answer(rotates: true),
            save: .saved(9), loggedOut: true, answer: .revoke),
        CommitRow(
            name: "logout here and in another process: an answer is revoked, nothing else forgotten",
            what: .answer(rotates: false), save: .refusedAfterLogout, loggedOut: true, answer: .revoke),
        CommitRow(
            name: "logout here wins over a failed save: logged out", what: .answer(rotates: true),
            save: .failed(storeDown), loggedOut: true, answer: .fail(.loggedOut)),
        CommitRow(
            name: "logout here wins over an unsaved rotation: the logout revoked it itself",
            what: .unsavedRotation(held: false), save: .saved(9), loggedOut: true, answer: .fail(.loggedOut)),
        CommitRow(
            name: "logout here wins over an unsaved rotation whose save failed", what: .unsavedRotation(held: true),
            save: .failed(storeDown), loggedOut: true, answer: .fail(.loggedOut)),
        CommitRow(
            name: "an unsaved rotation a newer entry replaced during the save is left as it is",
            what: .unsavedRotation(held: false), save: .saved(10), loggedOut: false, answer: .superseded),
        CommitRow(
            name: "an unsaved rotation a newer entry replaced is left even when the store refused",
            what: .unsavedRotation(held: false), save: .refusedAfterLogout, loggedOut: false, answer: .superseded),
    ]

    @Test(arguments: commits)
    func aCommit(row: CommitRow) {
        #expect(RenewalFlight.committed(row.what, row.save, loggedOut: row.loggedOut) == row.answer)
    }

    // MARK: Around the flight

    @Test func theFirstRequestIsSentOnlyForTheCurrentFlightWithACallerAndNoCancellation() {
        #expect(RenewalFlight.sending(current: true, callers: true, cancelled: false))
        #expect(!RenewalFlight.sending(current: false, callers: true, cancelled: false))
        #expect(!RenewalFlight.sending(current: true, callers: false, cancelled: false))
        #expect(!RenewalFlight.sending(current: true, callers: true, cancelled: true))
    }

    @Test func theLastCallerLeavingCancelsTheFlightOnlyBeforeItsRequestIsSent() {
        #expect(RenewalFlight.callerLeft(callersLeft: 0, sent: false) == .cancelFlight)
        #expect(RenewalFlight.callerLeft(callersLeft: 0, sent: true) == .keepFlight)
        #expect(RenewalFlight.callerLeft(callersLeft: 1, sent: false) == .keepFlight)
        #expect(RenewalFlight.callerLeft(callersLeft: 2, sent: true) == .keepFlight)
    }

    @Test func whatAFlightsCallersAreToldWhenItFailed() {
        let refused = AuthError.interactionRequired("refused")
        #expect(RenewalFlight.failure(refused, loggedOut: false) == refused)
        #expect(RenewalFlight.failure(refused, loggedOut: true) == .loggedOut)
        #expect(RenewalFlight.failure(CancellationError(), loggedOut: false) == .cancelled)
        #expect(RenewalFlight.failure(CancellationError(), loggedOut: true) == .cancelled)
    }
}

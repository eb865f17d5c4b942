import Foundation
import TestSupport
import Testing
import TokenRelayLogging

@testable import TokenRelayConfig

#if canImport(Glibc)
    import Glibc
#endif

/// The bearer token source of the single profile in `result`.
func bearerSource(_ result: ConfigLoadResult) throws -> SecretSource {
    guard case .bearer(let token, _)? = result.settings?.environments.first?.profiles.first?.kind else {
        throw SourceMissing(diagnostics: result.diagnostics.map(\.rendered))
    }
    return token
}

struct SourceMissing: Error {
    var diagnostics: [String]
}

/// Resolves and returns the error description, or `nil` when it resolved.
func resolutionError(_ source: SecretSource) async -> String? {
    do {
        _ = try await source.resolve()
        return nil
    } catch {
        return error.description
    }
}

@Suite struct SecretSourceTests {
    @Test func environmentSourceResolvesLazilyAndRegistersTheValue() async throws {
        let value = "env-secret-\(UUID().uuidString)"
        let result = await decodeConfig(bearerConfig("{ env: API_TOKEN }"), environment: ["API_TOKEN": value])
        let source = try bearerSource(result)
        #expect(!Redactor.shared.redact(value).contains(Redactor.mask))
        #expect(try await source.resolve() == value)
        #expect(Redactor.shared.redact("x \(value) y") == "x \(Redactor.mask) y")
        #expect(!"\(source)".contains(value))
    }

    @Test func missingEnvironmentVariableNamesIt() async throws {
        let source = try bearerSource(await decodeConfig(bearerConfig("{ env: API_TOKEN }")))
        let error = await resolutionError(source)
        #expect(error?.contains("API_TOKEN") == true)
        #expect(error?.hasPrefix("\(testConfigPath):8:") == true)
    }

    @Test func fileSourceIsRelativeToTheConfigFolderAndTrimsOneNewline() async throws {
        let files = InMemoryFileSystem([
            "/cfg/secrets/token": "file-secret-1\n", "/cfg/secrets/two": "file-secret-2\n\n",
        ])
        let source = try bearerSource(await decodeConfig(bearerConfig("{ file: secrets/token }"), files: files))
        #expect(source.origin == .file(path: "/cfg/secrets/token"))
        #expect(try await source.resolve() == "file-secret-1")
        // Only one newline is trimmed: what is left holds a line break, which no secret may.
        let two = try bearerSource(await decodeConfig(bearerConfig("{ file: secrets/two }"), files: files))
        #expect(await resolutionError(two)?.contains("contains a line break") == true)
    }

    @Test func missingFileFailsAtResolutionAndWarnsAtLoad() async throws {
        let result = await decodeConfig(bearerConfig("{ file: ~/nope }"))
        #expect(
            result.warnings.contains { $0.message.contains("/home/u/nope") && $0.message.contains("does not exist") })
        let error = await resolutionError(try bearerSource(result))
        #expect(error?.contains("/home/u/nope: no such file") == true)
        let checked = await decodeConfig(bearerConfig("{ file: ~/nope }"), mode: .check(resolveSecrets: true))
        #expect(checked.errors.map(\.line) == [8])
    }

    @Test func groupOrWorldReadableSecretFileIsWarnedAbout() async throws {
        let files = InMemoryFileSystem()
        files.write("secret", toPath: "/cfg/token", mode: 0o644)
        let result = await decodeConfig(bearerConfig("{ file: token }"), files: files)
        #expect(result.warnings.first?.message.contains("mode 0644") == true)
        files.write("secret", toPath: "/cfg/token", mode: 0o600)
        #expect(await decodeConfig(bearerConfig("{ file: token }"), files: files).diagnostics.isEmpty)
    }

    @Test func realWorldReadableFileIsWarnedAbout() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("config-test-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let secretPath = folder + "/token"
        try "real-file-secret\n".write(toFile: secretPath, atomically: false, encoding: .utf8)
        chmod(secretPath, 0o604)
        let configPath = folder + "/config.yaml"
        try bearerConfig("{ file: token }").write(toFile: configPath, atomically: false, encoding: .utf8)
        let result = await ConfigLoader().load(path: configPath, environment: commandEnvironment, mode: .serve)
        #expect(result.warnings.map(\.line) == [8])
        #expect(try await bearerSource(result).resolve() == "real-file-secret")
    }

    @Test func commandSourceRunsWithoutAShellAndTrimsOneNewline() async throws {
        let yaml = bearerConfig("{ command: [python3, -c, \"print('cmd-secret-42')\"] }")
        let source = try bearerSource(await decodeConfig(yaml, environment: commandEnvironment))
        #expect(try await source.resolve() == "cmd-secret-42")
        #expect(Redactor.shared.redact("cmd-secret-42") == Redactor.mask)
    }

    @Test func commandStartsWithAnEmptySignalMask() async throws {
        // Test threads block SIGTERM and friends; the child must not inherit that.
        let script = "import signal; print(len(signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
        let output = try await ProcessCommandRunner().run(
            argv: ["python3", "-c", script], environment: commandEnvironment, timeout: .seconds(20))
        #expect(String(decoding: output, as: UTF8.self) == "0\n")
    }

    @Test func commandInheritsNoDescriptorBeyondStandardStreams() async throws {
        let leaky = open("/dev/null", O_RDONLY)  // deliberately without O_CLOEXEC
        #expect(leaky > 2)
        defer { close(leaky) }
        let script = "import os; print(' '.join(sorted(os.listdir('/proc/self/fd'), key=int)))"
        let output = try await ProcessCommandRunner().run(
            argv: ["python3", "-c", script], environment: commandEnvironment, timeout: .seconds(20))
        let descriptors = String(decoding: output, as: UTF8.self).split(separator: " ").compactMap {
            Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(!descriptors.contains(leaky), "child saw \(descriptors), leaky fd \(leaky)")
        #expect(descriptors.filter { $0 > 3 }.isEmpty, "child saw \(descriptors)")
    }

    @Test func failingCommandNamesItsProgramAndStatusButNotItsOutput() async throws {
        let script = "import sys; print('stdout-leak-7'); sys.stderr.write('vault: denied\\\\n'); sys.exit(3)"
        let yaml = bearerConfig("{ command: [python3, -c, \"\(script)\"] }")
        let source = try bearerSource(await decodeConfig(yaml, environment: commandEnvironment))
        let error = try #require(await resolutionError(source))
        #expect(error.contains("python3 exited with status 3"))
        #expect(error.contains("vault: denied"))
        #expect(!error.contains("stdout-leak-7"))
    }

    @Test func commandStderrIsRedactedAndBounded() async throws {
        let known = "known-secret-\(UUID().uuidString)"
        Redactor.shared.register(known)
        let script = "import sys; sys.stderr.write('\(known) ' + 'x' * 5000); sys.exit(1)"
        do {
            _ = try await ProcessCommandRunner().run(
                argv: ["python3", "-c", script], environment: commandEnvironment, timeout: .seconds(20))
            Issue.record("expected a failure")
        } catch {
            #expect(!error.description.contains(known))
            #expect(error.description.contains(Redactor.mask))
            #expect(error.description.count < 800)
        }
    }

    @Test func commandPastItsLimitIsKilled() async throws {
        let yaml = bearerConfig("{ command: [python3, -c, \"import time; time.sleep(120)\"], timeout: 300ms }")
        let source = try bearerSource(await decodeConfig(yaml, environment: commandEnvironment))
        let error = await resolutionError(source)
        #expect(error?.contains("did not finish within") == true)
        #expect(error?.contains("killed") == true)
    }

    @Test func commandWhoseHelperKeepsItsPipeOpenStillResolves() async throws {
        // Like `pass` starting gpg-agent: the command exits 0 while a process it started still
        // holds stdout open. The secret is returned without waiting for the helper.
        let script =
            "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(15)']); print('grand-secret')"
        let output = try await ProcessCommandRunner().run(
            argv: ["python3", "-c", script], environment: commandEnvironment, timeout: .seconds(10))
        #expect(String(decoding: output, as: UTF8.self) == "grand-secret\n")
    }

    @Test func cancellingTheCallerKillsTheCommand() async {
        let task = Task {
            try await ProcessCommandRunner().run(
                argv: ["python3", "-c", "import time; time.sleep(120)"], environment: commandEnvironment,
                timeout: .seconds(120))
        }
        task.cancel()
        let result = await task.result
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect("\(error)".contains("cancelled and killed"))
    }

    @Test func unknownCommandIsReported() async throws {
        let source = try bearerSource(
            await decodeConfig(bearerConfig("{ command: [no-such-program-xyz] }"), environment: commandEnvironment))
        #expect(await resolutionError(source)?.contains("no-such-program-xyz was not found on PATH") == true)
    }

    @Test func emptySecretIsAnError() async throws {
        let source = try bearerSource(await decodeConfig(bearerConfig("{ env: EMPTY }"), environment: ["EMPTY": ""]))
        #expect(await resolutionError(source)?.contains("EMPTY is not set or empty") == true)
        let runner = FixedCommandRunner(output: "\n")
        let command = try bearerSource(await decodeConfig(bearerConfig("{ command: [x] }"), runner: runner))
        #expect(await resolutionError(command)?.contains("is empty") == true)
    }

    @Test func inlineSecretIsRegisteredWhenReadAndNeverDescribed() async throws {
        let value = "inline-\(UUID().uuidString)"
        let result = await decodeConfig(bearerConfig(value))
        #expect(Redactor.shared.redact(value) == Redactor.mask)
        let source = try bearerSource(result)
        #expect(source.description == "SecretSource(inline value)")
        #expect(!String(reflecting: source).contains(value))
        #expect(try await source.resolve() == value)
    }
}

@Suite struct ShortSecretTests {
    @Test(arguments: ["ab", "abc", "é"])
    func aSecretShorterThanFourBytesIsRefusedNamingTheKeyButNotTheValue(value: String) async throws {
        let source = try bearerSource(await decodeConfig(bearerConfig("{ env: SHORT }"), environment: ["SHORT": value]))
        let error = try #require(await resolutionError(source))
        #expect(error.contains("shorter than 4 bytes"), "\(error)")
        #expect(error.contains("profiles.p.token"), "names the profile and key: \(error)")
        #expect(error.hasPrefix("\(testConfigPath):"), "says where it is declared: \(error)")
        #expect(!error.contains("'\(value)'") && !error.hasSuffix(value), "\(error)")
    }

    @Test func aFourByteSecretIsAcceptedAndMasked() async throws {
        let source = try bearerSource(await decodeConfig(bearerConfig("{ env: FOUR }"), environment: ["FOUR": "w9#q"]))
        #expect(try await source.resolve() == "w9#q")
        #expect(Redactor.shared.redact("x w9#q y") == "x \(Redactor.mask) y")
    }
}

@Suite struct LineBreakSecretTests {
    @Test(arguments: ["tok-canary\r\nX-Injected: 1", "tok-canary\nsecond", "tok-canary\rx", "tok\u{0}canary"])
    func aSecretWithALineBreakIsRefusedWhereItIsResolvedNamingTheKeyButNotTheValue(value: String) async throws {
        let source = try bearerSource(
            await decodeConfig(bearerConfig("{ env: BROKEN }"), environment: ["BROKEN": value]))
        let error = try #require(await resolutionError(source))
        #expect(error.contains("contains a line break (CR or LF) or a NUL byte"), "\(error)")
        #expect(error.contains("profiles.p.token"), "names the profile and key: \(error)")
        #expect(!error.contains("tok-canary") && !error.contains("canary"), "\(error)")
    }
}

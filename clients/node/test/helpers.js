// Shared test helpers: the fake server (shared with the Python suite), the real binary
// ($TOKENRELAY_BIN or ../../.build/debug/tokenrelay), the interop stack ($TOKENRELAY_STACK_ENV).
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const repo = resolve(here, '..', '..', '..');
export const fakeBin = resolve(here, '..', '..', 'python', 'tests', 'fake_tokenrelay.py');

/** @returns {string|null} */
export function realBin() {
  const candidate = process.env.TOKENRELAY_BIN || resolve(repo, '.build', 'debug', 'tokenrelay');
  try { accessSync(candidate, constants.X_OK); return candidate; } catch { return null; }
}

/** Folders the tests made, removed when the test process exits. */
const scratch = /** @type {string[]} */ ([]);
process.on('exit', () => { for (const dir of scratch) rmSync(dir, { recursive: true, force: true }); });

/**
 * A new folder under the temporary directory, removed when the test process exits (a run
 * leaves nothing behind: scripts/test checks).
 * @param {string} prefix
 * @returns {string}
 */
export function scratchDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
}

// Every real tokenrelay a test starts keeps its default session store here, never in the
// user's ~/.local/state.
const stateHome = scratchDir('tokenrelay-node-state-');
/** The environment for the real binary: the test process's, with a private XDG_STATE_HOME. */
export const isolatedEnviron = { ...process.env, XDG_STATE_HOME: stateHome };
export const testEnviron = { ...isolatedEnviron, TOKENRELAY_ENABLE_TEST_METHODS: '1' };

/** Quiet log sink that records lines. */
export function logSink() {
  /** @type {[string, string][]} */
  const lines = [];
  const onLog = (/** @type {string} */ line, /** @type {string} */ level) => { lines.push([level, line]); };
  return { lines, onLog };
}

/** @param {number} pid */
export function pidExists(pid) {
  try { process.kill(pid, 0); } catch (e) { return /** @type {any} */ (e).code === 'EPERM'; }
  try { return readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop()?.trim().split(' ')[0] !== 'Z'; } catch { return false; }
}

/** The interop stack's variables, or null when TOKENRELAY_STACK_ENV is unset. */
export function stackEnv() {
  const path = process.env.TOKENRELAY_STACK_ENV;
  if (!path) return null;
  const out = execFileSync('bash', ['-c', 'set -a; . "$1"; env -0', 'bash', path]);
  return Object.fromEntries(out.toString().split('\0').filter((s) => s.includes('=')).map((s) => [s.slice(0, s.indexOf('=')), s.slice(s.indexOf('=') + 1)]));
}

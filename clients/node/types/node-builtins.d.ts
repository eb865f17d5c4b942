// The part of Node's API the client uses, declared for `tsc -p clients/node` (tsconfig.json).
// @types/node comes from the npm registry, which is not reachable here; these declarations
// follow it for exactly what lib/ calls. A new Node API used in lib/ must be added here (tsc
// then fails until it is), which keeps the check honest rather than typing Node as `any`.

interface AbortSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

declare class URL {
  constructor(input: string, base?: string | URL);
  readonly href: string;
  toString(): string;
}

type BufferEncoding = 'utf8' | 'utf-8' | 'base64' | 'hex' | 'latin1' | 'ascii';

interface Buffer extends Uint8Array {
  toString(encoding?: BufferEncoding): string;
}

declare const Buffer: {
  from(data: string, encoding?: BufferEncoding): Buffer;
  from(data: Uint8Array | ArrayBuffer | readonly number[]): Buffer;
  alloc(size: number): Buffer;
  concat(list: readonly Uint8Array[]): Buffer;
  isBuffer(value: unknown): value is Buffer;
};

declare namespace NodeJS {
  interface Timeout {
    ref(): this;
    unref(): this;
  }
  type ProcessEnv = Record<string, string | undefined>;
}

declare const process: {
  readonly env: NodeJS.ProcessEnv;
  readonly pid: number;
  readonly platform: string;
};

declare const console: { error(...data: unknown[]): void; log(...data: unknown[]): void };
declare function setTimeout(callback: () => void, ms?: number): NodeJS.Timeout;
declare function clearTimeout(timeout: NodeJS.Timeout | undefined): void;
declare function queueMicrotask(callback: () => void): void;

declare module 'node:fs' {
  export const constants: { readonly F_OK: number; readonly R_OK: number; readonly X_OK: number };
  export function accessSync(path: string, mode?: number): void;
  export function statSync(path: string): { isFile(): boolean; isDirectory(): boolean };
}

declare module 'node:path' {
  export const delimiter: string;
  export const sep: string;
  export function join(...paths: string[]): string;
}

declare module 'node:events' {
  export class EventEmitter {
    on(event: string | symbol, listener: (...args: any[]) => void): this;
    off(event: string | symbol, listener: (...args: any[]) => void): this;
    once(event: string | symbol, listener: (...args: any[]) => void): this;
    emit(event: string | symbol, ...args: any[]): boolean;
    listenerCount(event: string | symbol): number;
  }
}

declare module 'node:child_process' {
  interface Writable {
    readonly writable: boolean;
    readonly writableLength: number;
    readonly writableHighWaterMark: number;
    write(chunk: string | Uint8Array): boolean;
    end(): void;
    on(event: 'drain' | 'close', listener: () => void): this;
    on(event: 'error', listener: (error: Error) => void): this;
    off(event: 'drain' | 'close', listener: () => void): this;
  }
  interface Readable {
    readonly readableLength: number;
    on(event: 'data', listener: (chunk: Buffer) => void): this;
    pause(): this;
    resume(): this;
  }
  export interface ChildProcess {
    readonly pid: number | undefined;
    readonly exitCode: number | null;
    readonly signalCode: string | null;
    readonly stdin: Writable;
    readonly stdout: Readable;
    readonly stderr: Readable;
    kill(signal?: string): boolean;
    on(event: 'close', listener: (code: number | null, signal: string | null) => void): this;
    on(event: 'error', listener: (error: Error) => void): this;
  }
  export function spawn(
    command: string, args: readonly string[],
    options: { stdio: ['pipe', 'pipe', 'pipe']; env?: NodeJS.ProcessEnv },
  ): ChildProcess;
}

interface SymbolConstructor {
  /** Node 20+ (explicit resource management); undefined before. */
  readonly asyncDispose: symbol | undefined;
}

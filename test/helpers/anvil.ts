/**
 * Starts a real anvil node (from @foundry-rs/anvil) for tests that need genuine EVM answers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { dirname, resolve } from 'node:path';
import { freePort } from './ports.ts';

/** Package root, resolved from this file (test/helpers/anvil.ts), not from the cwd. */
const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The anvil launcher installed by @foundry-rs/anvil. */
export const ANVIL_BIN = resolve(PACKAGE_ROOT, 'node_modules', '.bin', 'anvil');

/** Options of {@link startAnvil}. */
export interface AnvilOptions {
  /** Listen port; a free one by default. */
  port?: number;
  /** Chain id (default 31337). */
  chainId?: number;
  /** Seconds between mined blocks; instant mining when unset. */
  blockTime?: number;
  /** Extra command-line arguments. */
  args?: string[];
}

/** A running anvil node. */
export interface AnvilHandle {
  url: string;
  port: number;
  chainId: number;
  /**
   * Sends one JSON-RPC call; resolves with `result`, rejects with an Error carrying `code`/`data` on `error`.
   * @param timeoutMs the call's deadline (10 s; mining a thousand blocks on a loaded machine needs more)
   */
  rpc(method: string, params?: unknown[], timeoutMs?: number): Promise<any>;
  /** Kills the process and waits for it to exit and for its port to be released. */
  stop(): Promise<void>;
}

/** Error thrown by {@link AnvilHandle.rpc} when anvil answers a JSON-RPC error. */
export class AnvilRpcError extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'AnvilRpcError';
  }
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // SIGTERM, not SIGKILL: the .bin/anvil launcher is a node wrapper that forwards SIGTERM to
  // the real binary; SIGKILL would orphan the binary.
  process.on('exit', () => {
    for (const p of live) {
      try {
        p.kill('SIGTERM');
      } catch {
        /* already gone */
      }
    }
  });
}

let nextId = 1;

async function call(url: string, method: string, params: unknown[] = [], timeoutMs = 10_000): Promise<any> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = (await res.json()) as { result?: unknown; error?: { code: number; message: string; data?: unknown } };
  if (body.error) throw new AnvilRpcError(body.error.message, body.error.code, body.error.data);
  return body.result;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** True when something accepts a TCP connection on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: '127.0.0.1', port });
    const done = (up: boolean) => {
      sock.destroy();
      resolve(up);
    };
    sock.setTimeout(500, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

/**
 * Waits (polling every 20 ms, at most `ms`) until nothing listens on `port` any more. The
 * `.bin/anvil` launcher exits as soon as it has forwarded SIGTERM, while the anvil binary it
 * started may still hold the port for a moment, longer on a busy machine (parallel test workers).
 */
async function portReleased(port: number, ms = 3000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until && (await accepts(port))) await sleep(20);
}

/**
 * Spawns anvil on 127.0.0.1 and waits (polling `eth_chainId` every 50 ms, up to 10 s) until it answers.
 * @param opts port, chain id, block time, extra args
 */
export async function startAnvil(opts: AnvilOptions = {}): Promise<AnvilHandle> {
  // A free port may be taken between freePort() and anvil's bind: retry with another one.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts, opts.port ?? (await freePort()));
    } catch (e) {
      if (opts.port !== undefined || attempt >= 3 || !(e instanceof AnvilExitedError)) throw e;
    }
  }
}

class AnvilExitedError extends Error {}

async function startOnce(opts: AnvilOptions, port: number): Promise<AnvilHandle> {
  const chainId = opts.chainId ?? 31337;
  const args = ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(chainId), '--silent'];
  if (opts.blockTime !== undefined) args.push('--block-time', String(opts.blockTime));
  if (opts.args) args.push(...opts.args);

  const child = spawn(ANVIL_BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  installExitHook();
  live.add(child);
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => {
    if (stderr.length < 8192) stderr += d;
  });
  let exited = child.exitCode !== null;
  const exitPromise = new Promise<void>((res) => {
    child.once('exit', () => {
      exited = true;
      live.delete(child);
      res();
    });
  });
  let spawnError: Error | undefined;
  child.once('error', (e) => {
    spawnError = e;
  });

  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (!exited) {
      child.kill('SIGTERM');
      const t = setTimeout(() => {
        if (!exited) child.kill('SIGKILL');
      }, 2000);
      await exitPromise;
      clearTimeout(t);
      await portReleased(port);
    }
  };

  const deadline = Date.now() + 10_000;
  for (;;) {
    if (spawnError) throw new Error(`anvil failed to start: ${spawnError.message}`);
    if (exited) throw new AnvilExitedError(`anvil exited before answering on port ${port} (code ${child.exitCode}): ${stderr.trim()}`);
    try {
      const got = await call(url, 'eth_chainId', [], 1000);
      // Another process on a recycled port could answer too: insist on our chain id and a live child.
      if (typeof got === 'string' && BigInt(got) === BigInt(chainId) && !exited) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`anvil did not answer eth_chainId on ${url} within 10 s: ${stderr.trim()}`);
    }
    await sleep(50);
  }

  return {
    url,
    port,
    chainId,
    rpc: (method, params, timeoutMs) => call(url, method, params ?? [], timeoutMs),
    stop,
  };
}

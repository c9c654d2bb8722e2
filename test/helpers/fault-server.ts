/**
 * A scriptable fake JSON-RPC upstream for tests (node:http on 127.0.0.1, free port).
 *
 * Each request consumes one {@link FaultStep} from the script queue (in order); when the queue
 * is empty the default step applies (`ok` unless changed with `setDefault`). `eth_chainId`
 * requests are answered `ok` without consuming the script unless `scriptChainId: true`, so a
 * proxy's chain-id probes do not disturb a test's script. Batch bodies are answered element-wise
 * with `ok` (unless `scriptBatch: true`, where one step applies to the whole batch request).
 * The caller's id is echoed byte-for-byte (integers above 2^53 included).
 */
import { listenOnLoopback } from './ports.ts';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { parse as losslessParse, stringify as losslessStringify } from 'lossless-json';

/** One scripted behaviour for one request. */
export type FaultStep =
  | { kind: 'ok'; result?: unknown }
  | { kind: 'delay'; ms: number; then?: FaultStep }
  | { kind: 'hang' }
  /**
   * Held until `barrier.size` requests wait on the same barrier, then all go on to `then` (ok by
   * default): proves they were in flight at once, with no clock (make one with {@link barrier}).
   */
  | { kind: 'barrier'; barrier: Barrier; then?: FaultStep }
  | { kind: 'reset' }
  | { kind: 'status'; status: number; body?: string }
  | { kind: 'rpcError'; code: number; message: string; data?: unknown }
  | { kind: 'garbage' }
  | { kind: 'wrongId' }
  | { kind: 'truncated' };

/** Requests held by `barrier` steps until `size` of them wait. */
export interface Barrier {
  readonly size: number;
  readonly waiting: Array<() => void>;
}

/** A barrier for `size` requests (see the `barrier` step). */
export function barrier(size: number): Barrier {
  return { size, waiting: [] };
}

/** A request as seen by the fake upstream (one per batch element). */
export interface FaultCall {
  method: string;
  params: unknown;
  id: unknown;
  /** HTTP request headers (lower-cased names). */
  headers: IncomingHttpHeaders;
  /** True when the call arrived inside a batch body. */
  batch: boolean;
  /** Arrival time, `performance.now()` ms (for hedge-timing assertions). */
  at: number;
}

/** Options of {@link startFaultServer}. */
export interface FaultServerOptions {
  /** Chain id answered to `eth_chainId` / `net_version` (default 31337 = 0x7a69). */
  chainId?: number;
  /** Result for an `ok` step without an explicit result; `undefined` falls back to the built-in table. */
  handler?: (req: { method: string; params: unknown; id: unknown }) => unknown;
  /** When true, `eth_chainId` requests consume script steps like any other (default false). */
  scriptChainId?: boolean;
  /** When true, a batch body consumes one step for the whole HTTP request (default false: always ok). */
  scriptBatch?: boolean;
  /**
   * When set, only single calls of these methods consume script steps; other calls (a state
   * poller's, which may come at any moment) get the default step, so a step scripted for the
   * test's own call is never taken by a poll that happens to arrive first.
   */
  scriptMethods?: readonly string[];
  /** Port to listen on (default: a free one); a test restarting a closed upstream at its old address passes it. */
  port?: number;
}

/** A running fake upstream. */
export interface FaultServer {
  url: string;
  port: number;
  /** Every call received, in arrival order (batch elements one by one). */
  calls: FaultCall[];
  /** Queues steps, consumed one per request in order. */
  script(...steps: FaultStep[]): void;
  /** Step used when the script queue is empty (default `{kind: 'ok'}`). */
  setDefault(step: FaultStep): void;
  /** Number of queued steps not yet consumed. */
  pendingSteps(): number;
  /** Clears the script, the recorded calls and the default step. */
  reset(): void;
  /** Destroys every socket (hung requests included) and closes the server. */
  close(): Promise<void>;
}

const OK: FaultStep = { kind: 'ok' };

interface ParsedReq {
  method: string;
  params: unknown;
  id: unknown;
  /** The id as raw JSON text (`null` when absent). */
  idRaw: string;
}

/** Built-in answers for an `ok` step (used when neither the step nor the handler gives one). */
export function builtinResult(method: string, params: unknown, chainId: number): unknown {
  switch (method) {
    case 'eth_chainId':
      return `0x${chainId.toString(16)}`;
    case 'net_version':
      return String(chainId);
    case 'eth_blockNumber':
      return '0x10';
    case 'eth_syncing':
      return false;
    // A real node never answers null to a state read at a block it has (spec §7): an empty account.
    case 'eth_getBalance':
    case 'eth_getTransactionCount':
      return '0x0';
    case 'eth_getCode':
      return '0x';
    case 'eth_getStorageAt':
      return `0x${'0'.repeat(64)}`;
    case 'eth_getBlockByNumber': {
      const p0 = Array.isArray(params) ? params[0] : undefined;
      const n = typeof p0 === 'string' && /^0x[0-9a-fA-F]+$/.test(p0) ? BigInt(p0) : 0x10n;
      return {
        number: `0x${n.toString(16)}`,
        hash: `0x${n.toString(16).padStart(64, '0')}`,
        parentHash: `0x${(n > 0n ? n - 1n : 0n).toString(16).padStart(64, '0')}`,
        timestamp: `0x${(1_700_000_000n + n * 12n).toString(16)}`,
        transactions: [],
      };
    }
    default:
      return null;
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function toParsed(el: unknown, llEl: unknown): ParsedReq {
  const o = el && typeof el === 'object' && !Array.isArray(el) ? (el as Record<string, unknown>) : {};
  const ll = llEl && typeof llEl === 'object' && !Array.isArray(llEl) ? (llEl as Record<string, unknown>) : {};
  const idRaw = 'id' in ll ? (losslessStringify(ll.id) ?? 'null') : 'null';
  return { method: typeof o.method === 'string' ? o.method : '', params: o.params, id: o.id ?? null, idRaw };
}

/** A clearly different id of the same JSON type. */
function wrongIdRaw(idRaw: string): string {
  if (idRaw.startsWith('"')) return JSON.stringify(`${JSON.parse(idRaw) as string}-wrong`);
  if (/^-?\d+$/.test(idRaw)) return (BigInt(idRaw) + 1_000_003n).toString();
  return '987654321';
}

/**
 * Starts the fake upstream on 127.0.0.1 with a port picked by the kernel.
 * @param opts chain id, result handler, scripting switches
 */
export async function startFaultServer(opts: FaultServerOptions = {}): Promise<FaultServer> {
  const chainId = opts.chainId ?? 31337;
  const queue: FaultStep[] = [];
  let defaultStep: FaultStep = OK;
  const calls: FaultCall[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;

  const resultFor = (p: ParsedReq, step: { result?: unknown }): unknown => {
    if ('result' in step && step.result !== undefined) return step.result;
    if (opts.handler) {
      const r = opts.handler({ method: p.method, params: p.params, id: p.id });
      if (r !== undefined) return r;
    }
    return builtinResult(p.method, p.params, chainId);
  };

  const okText = (p: ParsedReq, step: { result?: unknown }, idRaw = p.idRaw): string =>
    `{"jsonrpc":"2.0","id":${idRaw},"result":${JSON.stringify(resultFor(p, step)) ?? 'null'}}`;

  const send = (res: ServerResponse, status: number, body: string, contentType = 'application/json') => {
    if (res.destroyed || res.writableEnded) return;
    res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };

  /** A throwing handler must not crash the test run: it is answered with -32603 instead. */
  const sendInternal = (res: ServerResponse, e: unknown) =>
    send(
      res,
      200,
      `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":${JSON.stringify(`fault server: ${e instanceof Error ? e.message : String(e)}`)}}}`,
    );

  const apply = (step: FaultStep, req: IncomingMessage, res: ServerResponse, p: ParsedReq | ParsedReq[]): void => {
    if (closed) return;
    const single = Array.isArray(p) ? undefined : p;
    const okBody = (): string => (Array.isArray(p) ? `[${p.map((x) => okText(x, {})).join(',')}]` : okText(p, step.kind === 'ok' ? step : {}));
    switch (step.kind) {
      case 'ok':
        send(res, 200, okBody());
        return;
      case 'delay': {
        const t = setTimeout(() => {
          timers.delete(t);
          try {
            apply(step.then ?? OK, req, res, p);
          } catch (e) {
            sendInternal(res, e);
          }
        }, step.ms);
        timers.add(t);
        return;
      }
      case 'hang':
        return; // never answered; close() destroys the socket
      case 'barrier': {
        const b = step.barrier;
        b.waiting.push(() => apply(step.then ?? OK, req, res, p));
        if (b.waiting.length >= b.size) for (const go of b.waiting.splice(0)) go();
        return;
      }
      case 'reset':
        req.socket.destroy();
        return;
      case 'status': {
        const body = step.body ?? '';
        const t = body.trimStart();
        send(res, step.status, body, t.startsWith('{') || t.startsWith('[') ? 'application/json' : 'text/plain');
        return;
      }
      case 'rpcError': {
        const error: Record<string, unknown> = { code: step.code, message: step.message };
        if (step.data !== undefined) error.data = step.data;
        const one = (x: ParsedReq) => `{"jsonrpc":"2.0","id":${x.idRaw},"error":${JSON.stringify(error)}}`;
        send(res, 200, Array.isArray(p) ? `[${p.map(one).join(',')}]` : one(p));
        return;
      }
      case 'garbage':
        send(res, 200, '<html><body>502 Bad Gateway: upstream said something that is not JSON</body></html>', 'application/json');
        return;
      case 'wrongId':
        send(
          res,
          200,
          single ? okText(single, {}, wrongIdRaw(single.idRaw)) : `[${(p as ParsedReq[]).map((x) => okText(x, {}, wrongIdRaw(x.idRaw))).join(',')}]`,
        );
        return;
      case 'truncated': {
        const full = okBody();
        send(res, 200, full.slice(0, Math.max(1, Math.floor(full.length / 2))));
        return;
      }
    }
  };

  const nextStep = (): FaultStep => queue.shift() ?? defaultStep;

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => sendInternal(res, e));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let text: string;
    try {
      text = await readBody(req);
    } catch {
      return;
    }
    let doc: unknown;
    let ll: unknown;
    try {
      doc = JSON.parse(text);
      ll = losslessParse(text);
    } catch {
      send(res, 200, '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}');
      return;
    }
    if (Array.isArray(doc)) {
      const llArr = Array.isArray(ll) ? ll : [];
      const parsed = doc.map((el, i) => toParsed(el, llArr[i]));
      for (const x of parsed) calls.push({ method: x.method, params: x.params, id: x.id, headers: req.headers, batch: true, at: performance.now() });
      if (parsed.length === 0) {
        send(res, 200, '[]');
        return;
      }
      apply(opts.scriptBatch ? nextStep() : OK, req, res, parsed);
      return;
    }
    const p = toParsed(doc, ll);
    calls.push({ method: p.method, params: p.params, id: p.id, headers: req.headers, batch: false, at: performance.now() });
    const step =
      p.method === 'eth_chainId' && !opts.scriptChainId ? OK : opts.scriptMethods && !opts.scriptMethods.includes(p.method) ? defaultStep : nextStep();
    apply(step, req, res, p);
  }
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.keepAliveTimeout = 5000;

  const port = await listenOnLoopback(server, 'fault server', opts.port);

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    calls,
    script: (...steps) => {
      queue.push(...steps);
    },
    setDefault: (step) => {
      defaultStep = step;
    },
    pendingSteps: () => queue.length,
    reset: () => {
      queue.length = 0;
      calls.length = 0;
      defaultStep = OK;
    },
    close: async () => {
      if (closed) return;
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      const done = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      server.closeAllConnections();
      await done;
    },
  };
}

/**
 * Earliest-block detection for `earliestBlockPlus` bounds (block-availability.ts), as eRPC's
 * state poller does it: once the upstream's latest block is known, a binary search over
 * `[0, latest]` with the bound's probe finds the lowest block the upstream serves (blocks 0 and 1
 * are tried first). It runs once per probe, and again every `updateRate` when that is above 0
 * (the smallest one among the upstream's bounds with that probe).
 *
 * Probe answers: a result decides (available or not, per probe); an error that is a fact about
 * the request (missing trie node, execution error, invalid params) means "not available"; any
 * other failure (timeout, transport, rate limit, unsupported method) stops the search and it is
 * tried again on the next tick. eRPC counts those as "not available" too, which on a flaky node
 * would set the bound at its head and send every archive call elsewhere; svc keeps the bound open
 * (0 + N) until a search completes.
 */
import { Gauge } from 'prom-client';
import type { Network, PluginHost, Upstream } from 'svc-proxy/plugin';
import { ErrEndpointUnsupported, isPassThrough, SvcError } from 'svc-proxy/plugin/errors';
import { toHex } from 'svc-proxy/util';
import { availabilitySpecOf, type EarliestOf, type Probe } from './block-availability.ts';
import { chainStateOf } from './chain.ts';
import { pollerSettingsOf } from './schema.ts';

/** One JSON-RPC call to the upstream being probed: resolves its result, rejects with its error. */
export type ProbeCall = (method: string, params: unknown[]) => Promise<unknown>;

/** Thrown by a probe whose answer says nothing about the block (the search stops). */
export class ProbeInconclusive extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProbeInconclusive';
  }
}

async function ask(call: ProbeCall, method: string, params: unknown[]): Promise<{ result?: unknown; refused: boolean }> {
  try {
    return { result: await call(method, params), refused: false };
  } catch (e) {
    // A fact about the request ("missing trie node", "header not found", a revert): the block is not served.
    if (e instanceof SvcError && isPassThrough(e) && !(e instanceof ErrEndpointUnsupported)) return { refused: true };
    throw new ProbeInconclusive(`${method}: ${(e as Error).message}`, { cause: e });
  }
}

const nonEmpty = (v: unknown): boolean =>
  v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0) && !(typeof v === 'object' && Object.keys(v as object).length === 0);

async function blockHash(call: ProbeCall, block: number): Promise<string | undefined> {
  const r = await ask(call, 'eth_getBlockByNumber', [toHex(block), false]);
  const h = r.result !== null && typeof r.result === 'object' ? (r.result as { hash?: unknown }).hash : undefined;
  return typeof h === 'string' ? h : undefined;
}

/**
 * Whether the upstream serves `block` for a probe kind (eRPC's probes):
 * - `blockHeader`: eth_getBlockByNumber(block) is a block;
 * - `eventLogs`: eth_getLogs({blockHash}) of that block has at least one log;
 * - `callState`: eth_getBalance(0x0…0, block) answers a value;
 * - `traceData`: trace_block, else debug_traceBlockByHash, else trace_replayBlockTransactions
 *   answers something non-empty (inconclusive when none of the three is supported).
 * @throws ProbeInconclusive when the answer says nothing about the block
 */
export async function probeBlock(call: ProbeCall, probe: Probe, block: number): Promise<boolean> {
  switch (probe) {
    case 'blockHeader': {
      const r = await ask(call, 'eth_getBlockByNumber', [toHex(block), false]);
      return !r.refused && nonEmpty(r.result);
    }
    case 'callState': {
      const r = await ask(call, 'eth_getBalance', ['0x0000000000000000000000000000000000000000', toHex(block)]);
      return !r.refused && r.result !== undefined && r.result !== null;
    }
    case 'eventLogs': {
      const hash = await blockHash(call, block);
      if (!hash) return false;
      const r = await ask(call, 'eth_getLogs', [{ blockHash: hash }]);
      return !r.refused && Array.isArray(r.result) && r.result.length > 0;
    }
    case 'traceData': {
      const hash = await blockHash(call, block);
      if (!hash) return false;
      let unsupported = 0;
      for (const [method, params] of [
        ['trace_block', [hash]],
        ['debug_traceBlockByHash', [hash, {}]],
        ['trace_replayBlockTransactions', [hash, ['trace']]],
      ] as const) {
        try {
          const r = await ask(call, method, [...params]);
          if (!r.refused && nonEmpty(r.result)) return true;
        } catch (e) {
          if ((e as ProbeInconclusive).cause instanceof ErrEndpointUnsupported) unsupported++;
          else throw e;
        }
      }
      if (unsupported === 3) throw new ProbeInconclusive('traceData: none of trace_block, debug_traceBlockByHash, trace_replayBlockTransactions is supported');
      return false;
    }
  }
}

/**
 * eRPC's search for the earliest available block in `[0, latest]`: blocks 0 and 1 first, then a
 * binary search for the lowest available block (availability is taken as monotone).
 * @param check whether a block is available (may throw: the search stops)
 * @param latest the upstream's latest block
 * @returns the earliest available block (`latest` when none below it is)
 */
export async function searchEarliest(check: (block: number) => Promise<boolean>, latest: number): Promise<number> {
  if (latest <= 0) return 0;
  if (await check(0)) return 0;
  if (await check(1)) return 1;
  let l = 2;
  let r = latest;
  while (l < r) {
    const mid = l + Math.floor((r - l) / 2);
    if (await check(mid)) r = mid;
    else l = mid + 1;
  }
  return l;
}

/** Shortest and longest wait between detection attempts while a search has not completed, ms. */
const MIN_RETRY_MS = 200;
const MAX_RETRY_MS = 5_000;

/**
 * Runs the earliest-block searches of every upstream with an `earliestBlockPlus` bound: taps
 * `upstreamJoined` (start, after the upstream's latest block is known) and `shutdown` (stop).
 * @param host the plugin host the evm-state plugin is applied to
 * @param maxPollTimeoutMs cap of one probe call's timeout, ms
 * @returns the earliest blocks found so far (0 until found)
 */
export function tapEarliestDetection(host: PluginHost, maxPollTimeoutMs: number): EarliestOf {
  const found = new WeakMap<Upstream, Map<Probe, number>>();
  const timers = new Map<Upstream, NodeJS.Timeout>();
  const gauge = new Gauge({
    name: 'svc_upstream_earliest_block',
    help: 'earliest block an upstream serves, found by binary search with the probe of its evm.blockAvailability earliestBlockPlus bound',
    labelNames: ['project', 'network', 'upstream', 'probe'],
    registers: [host.metrics],
  });

  const stop = (u: Upstream) => {
    const t = timers.get(u);
    if (t) clearTimeout(t);
    timers.delete(u);
  };

  const start = (u: Upstream, n: Network) => {
    stop(u);
    let spec;
    try {
      spec = availabilitySpecOf(u.config.settings.evm);
    } catch {
      return; // refused at start-up; a run-time upstream with broken bounds is served unbounded
    }
    // Probe → update rate (the smallest above 0 among the bounds using it; 0 = once).
    const rates = new Map<Probe, number>();
    for (const b of [spec?.lower, spec?.upper]) {
      if (b?.kind !== 'earliestPlus') continue;
      const cur = rates.get(b.probe);
      rates.set(b.probe, cur === undefined || cur === 0 ? b.updateRateMs : b.updateRateMs > 0 ? Math.min(cur, b.updateRateMs) : cur);
    }
    if (rates.size === 0) return;
    const settings = pollerSettingsOf(u, n, maxPollTimeoutMs);
    const retryMs = Math.min(MAX_RETRY_MS, Math.max(MIN_RETRY_MS, settings.intervalMs || MAX_RETRY_MS));
    const call: ProbeCall = async (method, params) => (await host.upstreamCall(n, u, method, params, settings.timeoutMs)).result;
    const values = found.get(u) ?? new Map<Probe, number>();
    found.set(u, values);
    const doneAt = new Map<Probe, number>();

    const tick = async () => {
      const latest = chainStateOf(n).peek(u)?.latest ?? 0;
      let next = retryMs;
      if (latest > 0) {
        for (const [probe, rate] of rates) {
          const at = doneAt.get(probe);
          if (at !== undefined && (rate === 0 || Date.now() - at < rate)) continue;
          try {
            const v = await searchEarliest((b) => probeBlock(call, probe, b), latest);
            values.set(probe, v);
            doneAt.set(probe, Date.now());
            gauge.set({ project: n.project.id, network: n.id, upstream: u.id, probe }, v);
            host.logger.debug({ upstream: u.id, probe, earliest: v }, 'earliest block found');
          } catch (e) {
            host.logger.debug({ upstream: u.id, probe, err: (e as Error).message }, 'earliest block search stopped; tried again later');
          }
        }
        const pending = [...rates.keys()].some((p) => !doneAt.has(p));
        if (!pending) {
          const periodic = [...rates.values()].filter((r) => r > 0);
          if (periodic.length === 0) return stop(u);
          next = Math.min(...periodic);
        }
      }
      if (!timers.has(u) || host.isClosed) return;
      const t = setTimeout(() => void tick(), next);
      t.unref();
      timers.set(u, t);
    };
    const t = setTimeout(() => void tick(), 0);
    t.unref();
    timers.set(u, t);
  };

  host.hooks.upstreamJoined.tap('evm-state:earliest', (u: Upstream, n: Network) => start(u, n));
  // Removed by a config reload (or out of service): no more probes. A network replaced by a
  // reload is rejoined first, which restarts the probes there.
  host.hooks.upstreamLeft.tap('evm-state:earliest', (u: Upstream) => {
    if (u.state === 'failed') stop(u);
  });
  host.hooks.shutdown.tapPromise('evm-state:earliest', async () => {
    for (const u of [...timers.keys()]) stop(u);
  });

  return (u, probe) => found.get(u)?.get(probe) ?? 0;
}

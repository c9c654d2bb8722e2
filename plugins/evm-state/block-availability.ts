/**
 * Block availability bounds of an upstream (`upstreams[].evm.blockAvailability`, eRPC's key of
 * the same name and shape): which block range an upstream can serve, so a call for a block
 * outside it skips that upstream before it is dialled (archive calls skip pruned nodes).
 *
 * A bound (`lower` / `upper`) sets exactly one of:
 * - `exactBlock: N`: the block N;
 * - `latestBlockMinus: N`: the upstream's own latest block minus N, recomputed on every call from
 *   what its state poller (and its answers) last reported; unbounded while its latest is unknown;
 * - `earliestBlockPlus: N`: the upstream's earliest block, found by binary search with `probe`
 *   (earliest.ts), plus N; `0 + N` until the search has finished (as eRPC does).
 * A computed range whose lower end is above its upper end is ignored (fail-open, as eRPC does).
 *
 * Taps: `select` at AVAILABILITY, before the head-based filter (availability.ts): drops the
 * candidates whose bounds exclude the lowest or highest concrete block the call reads (a
 * getLogs/trace_filter range: both ends; `earliest` is block 0). When every candidate is
 * excluded the call fails with `ErrEndpointMissingData` (-32014 "block not available", eRPC's
 * answer), not retried when only lower bounds excluded it (old data will not come back), retried
 * by the network failsafe otherwise (the head moves).
 */
import { Kind, Type, TypeRegistry } from '@sinclair/typebox';
import { Counter } from 'prom-client';
import { type CallContext, Duration, type PluginHost, type ResolvedConfig, SelectStage, Strict, type Upstream } from 'svc-proxy/plugin';
import { ConfigError, type ConfigProblem, ErrEndpointMissingData, ErrUpstreamsExhausted } from 'svc-proxy/plugin/errors';
import type { UpstreamChainState } from './api.ts';
import { blockRefOf, type BlockRef } from 'svc-proxy/util';
import { chainStateOf } from './chain.ts';

/** How an upstream's earliest block is probed (eRPC's probe kinds). */
export const PROBES = ['blockHeader', 'eventLogs', 'callState', 'traceData'] as const;

/** One probe kind: `blockHeader` (eth_getBlockByNumber), `eventLogs` (eth_getLogs by block hash, at least one log), `callState` (eth_getBalance), `traceData` (trace_block / debug_traceBlockByHash / trace_replayBlockTransactions). */
export type Probe = (typeof PROBES)[number];

/**
 * A block count or `null` (unset) as one JSON-schema type list: the loader's validator coerces
 * types, and inside a union it would turn `null` into 0 (or 0 into `null`), where a type list
 * keeps both as written.
 */
const NULLABLE_COUNT = 'SvcNullableBlockCount';
if (!TypeRegistry.Has(NULLABLE_COUNT)) TypeRegistry.Set(NULLABLE_COUNT, (_s, v) => v === null || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0));
const blockCount = (description: string) =>
  Type.Optional(Type.Unsafe<number | null>({ [Kind]: NULLABLE_COUNT, type: ['integer', 'null'], minimum: 0, description }));

const boundSchema = Strict(
  {
    exactBlock: blockCount('this block number (no probe, no updateRate)'),
    latestBlockMinus: blockCount("blocks below the upstream's own latest block, recomputed on every call"),
    earliestBlockPlus: blockCount("blocks above the upstream's earliest block (found by binary search with `probe`; 0 + N until found)"),
    probe: Type.Optional(
      Type.Union(
        PROBES.map((p) => Type.Literal(p)),
        { description: 'how the earliest block is found (default blockHeader); earliestBlockPlus only' },
      ),
    ),
    updateRate: Type.Optional(Duration({ description: 'how often the earliest block is searched again; 0 (default) = once; earliestBlockPlus only' })),
  },
  { description: 'one bound: exactly one of exactBlock, latestBlockMinus, earliestBlockPlus (null = unset)' },
);

/** Schema of `upstreams[].evm.blockAvailability` (eRPC's shape; `null` marks a side or kind unset, e.g. to not inherit `upstreamDefaults`). */
export const blockAvailabilitySchema = Type.Optional(
  Strict(
    {
      lower: Type.Optional(Type.Union([Type.Null(), boundSchema], { description: 'lowest block the upstream serves (absent = from genesis)' })),
      upper: Type.Optional(Type.Union([Type.Null(), boundSchema], { description: 'highest block the upstream serves (absent = up to its head)' })),
    },
    { description: "which block range this upstream can serve (eRPC's blockAvailability): calls for blocks outside it skip the upstream before it is dialled" },
  ),
);

/** One resolved bound. */
export interface BoundSpec {
  /** Which block the bound is relative to. */
  kind: 'exact' | 'latestMinus' | 'earliestPlus';
  /** The block number (`exact`) or offset in blocks. */
  value: number;
  /** The probe of an `earliestPlus` bound. */
  probe: Probe;
  /** How often the earliest block is searched again, ms (0 = once). */
  updateRateMs: number;
}

/** An upstream's resolved bounds; a side left out is unbounded. */
export interface AvailabilitySpec {
  lower?: BoundSpec;
  upper?: BoundSpec;
}

type RawBound = { exactBlock?: number | null; latestBlockMinus?: number | null; earliestBlockPlus?: number | null; probe?: Probe; updateRate?: number };

function boundOf(raw: RawBound, where: string, problems: ConfigProblem[]): BoundSpec | undefined {
  const kinds: Array<[BoundSpec['kind'], number]> = [];
  if (typeof raw.exactBlock === 'number') kinds.push(['exact', raw.exactBlock]);
  if (typeof raw.latestBlockMinus === 'number') kinds.push(['latestMinus', raw.latestBlockMinus]);
  if (typeof raw.earliestBlockPlus === 'number') kinds.push(['earliestPlus', raw.earliestBlockPlus]);
  if (kinds.length !== 1) {
    problems.push({
      path: where,
      message:
        kinds.length === 0
          ? 'a bound must set exactly one of exactBlock, latestBlockMinus, earliestBlockPlus'
          : 'exactBlock, latestBlockMinus and earliestBlockPlus are mutually exclusive in one bound',
    });
    return undefined;
  }
  const [kind, value] = kinds[0] as [BoundSpec['kind'], number];
  const updateRateMs = typeof raw.updateRate === 'number' ? raw.updateRate : 0;
  if (kind === 'exact' && (raw.probe !== undefined || updateRateMs !== 0)) {
    problems.push({ path: where, message: 'probe and updateRate apply to earliestBlockPlus only: remove them from an exactBlock bound' });
    return undefined;
  }
  return { kind, value, probe: raw.probe ?? 'blockHeader', updateRateMs };
}

/**
 * Resolves and checks an upstream's `evm.blockAvailability` (eRPC's validation rules).
 * @param evm the upstream's resolved `evm` settings
 * @param where the config path, for messages
 * @returns the spec, or undefined when the upstream has no bounds
 * @throws ConfigError when a bound sets none or several kinds, an exactBlock bound has a probe or
 *   updateRate, or the two bounds contradict each other (exact lower above exact upper; lower
 *   latestBlockMinus below upper latestBlockMinus; lower earliestBlockPlus above upper's)
 */
export function availabilitySpecOf(evm: unknown, where = 'evm.blockAvailability'): AvailabilitySpec | undefined {
  const ba =
    evm !== null && typeof evm === 'object'
      ? (evm as { blockAvailability?: { lower?: RawBound | null; upper?: RawBound | null } }).blockAvailability
      : undefined;
  if (!ba || (!ba.lower && !ba.upper)) return undefined;
  const problems: ConfigProblem[] = [];
  const lower = ba.lower ? boundOf(ba.lower, `${where}.lower`, problems) : undefined;
  const upper = ba.upper ? boundOf(ba.upper, `${where}.upper`, problems) : undefined;
  if (lower && upper && lower.kind === upper.kind) {
    if (lower.kind === 'exact' && lower.value > upper.value) problems.push({ path: where, message: 'lower.exactBlock must be <= upper.exactBlock' });
    if (lower.kind === 'latestMinus' && lower.value < upper.value)
      problems.push({ path: where, message: 'when both bounds are latestBlockMinus, lower.latestBlockMinus must be >= upper.latestBlockMinus' });
    if (lower.kind === 'earliestPlus' && lower.value > upper.value)
      problems.push({ path: where, message: 'when both bounds are earliestBlockPlus, lower.earliestBlockPlus must be <= upper.earliestBlockPlus' });
  }
  if (problems.length) throw new ConfigError(problems);
  return lower || upper ? { lower, upper } : undefined;
}

/** The earliest blocks found per probe of an upstream (earliest.ts); 0 until found. */
export type EarliestOf = (u: Upstream, probe: Probe) => number;

function boundValue(b: BoundSpec, latest: number, earliest: number): number | undefined {
  if (b.kind === 'exact') return b.value;
  if (b.kind === 'earliestPlus') return earliest + b.value;
  // latestBlockMinus: unbounded while the upstream's latest is unknown.
  return latest > 0 ? Math.max(0, latest - b.value) : undefined;
}

/**
 * The block range an upstream serves now, `[min, max]` (either end undefined = unbounded);
 * both undefined when the computed range is empty (fail-open, as eRPC does).
 * @param spec the upstream's bounds
 * @param state what the upstream last reported (its latest block)
 * @param earliest its earliest block for the bound's probe (0 until found)
 */
export function boundsOf(spec: AvailabilitySpec, state: UpstreamChainState | undefined, earliest: (probe: Probe) => number): { min?: number; max?: number } {
  const latest = state?.latest ?? 0;
  const min = spec.lower ? boundValue(spec.lower, latest, spec.lower.kind === 'earliestPlus' ? earliest(spec.lower.probe) : 0) : undefined;
  const max = spec.upper ? boundValue(spec.upper, latest, spec.upper.kind === 'earliestPlus' ? earliest(spec.upper.probe) : 0) : undefined;
  if (min !== undefined && max !== undefined && min > max) return {};
  return { min, max };
}

/** The lowest and highest concrete blocks of a reference (`earliest` = 0; other tags and hashes have none). */
export function blockSpanOf(ref: BlockRef | undefined): { lo?: number; hi?: number } {
  if (!ref) return {};
  if (ref.kind === 'number') return { lo: ref.number, hi: ref.number };
  if (ref.kind === 'tag') return ref.tag === 'earliest' ? { lo: 0, hi: 0 } : {};
  if (ref.kind === 'range') return { lo: blockSpanOf(ref.from).lo, hi: blockSpanOf(ref.to).hi };
  return {};
}

/** Upper bound of the per-upstream details in the error message. */
const MAX_LISTED = 8;

const fmt = (b: { min?: number; max?: number }) => `${b.min ?? 0}..${b.max ?? 'head'}`;

/**
 * Taps the `select` hook (stage AVAILABILITY, before the head-based filter) with the configured
 * bounds, and checks every configured upstream's bounds when the config is applied.
 * @param host the plugin host the evm-state plugin is applied to
 * @param earliestOf the earliest blocks found so far
 */
export function tapBlockBounds(host: PluginHost, earliestOf: EarliestOf): void {
  const specs = new WeakMap<Upstream, AvailabilitySpec | null>();
  const specOf = (u: Upstream): AvailabilitySpec | undefined => {
    let s = specs.get(u);
    if (s === undefined) {
      try {
        s = availabilitySpecOf(u.config.settings.evm, `upstream ${u.id} evm.blockAvailability`) ?? null;
      } catch (e) {
        // An upstream added at run time (providers) with broken bounds: logged, served unbounded.
        host.logger.warn({ upstream: u.id, err: (e as Error).message }, 'evm.blockAvailability ignored');
        s = null;
      }
      specs.set(u, s);
    }
    return s ?? undefined;
  };

  host.hooks.configured.tap('evm-state:block-bounds', (config: ResolvedConfig) => {
    const problems: ConfigProblem[] = [];
    for (const p of config.projects) {
      p.upstreams.forEach((u, i) => {
        try {
          availabilitySpecOf(u.settings.evm, `projects.${p.id}.upstreams[${i}].evm.blockAvailability`);
        } catch (e) {
          if (e instanceof ConfigError) problems.push(...e.problems);
          else throw e;
        }
      });
    }
    if (problems.length) throw new ConfigError(problems);
  });

  const skipped = new Counter({
    name: 'svc_upstream_block_unavailable_total',
    help: 'calls that skipped an upstream because the block they read is outside its evm.blockAvailability bounds, by bound (lower/upper)',
    labelNames: ['project', 'network', 'upstream', 'category', 'bound'],
    registers: [host.metrics],
  });

  host.hooks.select.tap({ name: 'evm-state:block-bounds', stage: SelectStage.AVAILABILITY }, (ups: Upstream[], ctx: CallContext) => {
    let any = false;
    for (const u of ups) if (specOf(u)) any = true;
    if (!any) return ups;
    const { lo, hi } = blockSpanOf(blockRefOf(ctx.request.method, ctx.request.params));
    if (lo === undefined && hi === undefined) return ups;
    const state = chainStateOf(ctx.network);
    const out: Upstream[] = [];
    const refused: string[] = [];
    let aboveUpper = false;
    for (const u of ups) {
      const spec = specOf(u);
      if (!spec) {
        out.push(u);
        continue;
      }
      const b = boundsOf(spec, state.peek(u), (probe) => earliestOf(u, probe));
      const below = b.min !== undefined && ((lo !== undefined && lo < b.min) || (hi !== undefined && hi < b.min));
      const above = b.max !== undefined && ((hi !== undefined && hi > b.max) || (lo !== undefined && lo > b.max));
      if (!below && !above) {
        out.push(u);
        continue;
      }
      if (above) aboveUpper = true;
      skipped.inc({
        project: ctx.project.id,
        network: ctx.network.id,
        upstream: u.id,
        category: host.methodLabel.value(ctx.request.method),
        bound: below ? 'lower' : 'upper',
      });
      if (refused.length < MAX_LISTED) refused.push(`${u.id} serves ${fmt(b)}`);
    }
    if (out.length > 0 || ups.length === 0) return out;
    const what = lo === hi ? `block ${lo}` : `blocks ${lo ?? '?'}..${hi ?? '?'}`;
    const cause = new ErrEndpointMissingData(
      `block not available: ${what} is outside the block availability of every upstream of ${ctx.network.id} (${refused.join('; ')})`,
      {
        details: { block: hi ?? lo, network: ctx.network.id },
      },
    );
    // Data below every lower bound will not appear later: no retry. A block above an upper bound may, once heads move.
    if (!aboveUpper) cause.confirmed = true;
    throw new ErrUpstreamsExhausted([cause], cause.message);
  });
}

/**
 * What a YAML selection policy remembers from one evaluation to the next (eRPC's cross-tick
 * state: the sticky primary registers, `excludedSince`, the previous order), although each
 * evaluation runs in a fresh node:vm context: the host hands it in as a {@link TickCarry} with
 * the evaluation and reads what the policy left in `carry.out` once the evaluation committed.
 * One {@link SelectionMemory} per evaluation scope; the sticky registers are the network's
 * ({@link StickyRegisters}), keyed by `stickyPrimary`'s own `scope` as eRPC keys them, so under
 * `evalScope: network-method` every method's evaluation shares the `network` register and each
 * has its own `network-method` one. A config reload that replaces the network starts afresh.
 * No hooks here.
 */
import type { PolicyContext } from './api.ts';
import type { DecisionDraft } from './view.ts';

/** `stickyPrimary`'s `scope` values (eRPC's): which evaluations share a register. */
export const STICKY_SCOPES = ['network', 'network-method', 'network-finality', 'network-method-finality'] as const;

/** One sticky primary register (eRPC's `stickyPrimary`). */
export interface StickyRegister {
  /** Upstream id held at the head. */
  readonly primary: string;
  /** When the primary last changed (or was seeded), epoch ms. */
  readonly lastSwitchAt: number;
}

/** `probeExcluded` options as the last evaluation asked for them, resolved and bounded. */
export interface ProbeSettings {
  /** Share of served calls mirrored to each excluded upstream, 0..1. */
  readonly sampleRate: number;
  /** Probes per upstream per window sent regardless of `sampleRate`. */
  readonly minSamples: number;
  /** Length of the `minSamples` window, ms. */
  readonly minSamplesWindowMs: number;
  /** Probes in flight per excluded upstream, at least 1. */
  readonly maxConcurrent: number;
  /** Deadline of one probe, ms. */
  readonly timeoutMs: number;
}

/** What a policy evaluation left for the host (validated: ids known, numbers bounded). */
export interface TickOutput {
  /** The register after the evaluation, when `stickyPrimary` ran, and the `stickyPrimary` scope it belongs to. */
  sticky?: StickyRegister & { readonly scope: (typeof STICKY_SCOPES)[number] };
  /** Present when the policy called `probeExcluded` without `reAdmitAfter`. */
  probe?: ProbeSettings;
  /** Upstream id -> reasons `shadowExcludeIf` would have excluded it for. */
  shadow?: Record<string, string[]>;
  /** Decisions the helpers record (sticky holds and switches, re-admissions). */
  notes?: DecisionDraft[];
}

/** The cross-tick state handed to one evaluation, and what it answered. */
export interface TickCarry {
  /** The `network` sticky register (null: cold start). */
  readonly sticky: StickyRegister | null;
  /** The register of each `stickyPrimary` scope this evaluation belongs to (null: cold start). */
  readonly stickies: Readonly<Record<(typeof STICKY_SCOPES)[number], StickyRegister | null>>;
  /** Upstream id -> when it dropped out of the order, epoch ms (absent while in the order). */
  readonly excludedSince: Readonly<Record<string, number>>;
  readonly previousOrder: readonly string[];
  /** Evaluations this network's policy committed before this one (eRPC's `ctx.tickCount`). */
  readonly tickCount: number;
  out?: TickOutput;
}

/** Bounds on `probeExcluded` options (the policy is trusted, the bounds keep a typo cheap). */
export const PROBE_LIMITS = Object.freeze({ maxConcurrent: 64, minSamples: 10_000, windowMs: 3_600_000, timeoutMs: 120_000 });
/** Decisions kept from one evaluation's helpers. */
const MAX_NOTES = 64;
/** Reasons kept per upstream from `shadowExcludeIf`, and their length. */
const MAX_REASONS = 8;
const MAX_TEXT = 200;

/** The carry of each evaluation, keyed by its context (how the sandbox finds it without a new public field). */
const CARRIES = new WeakMap<PolicyContext, TickCarry>();

/** Attaches a carry to an evaluation's context. */
export function attachCarry(ctx: PolicyContext, carry: TickCarry): void {
  CARRIES.set(ctx, carry);
}

/** The carry of an evaluation's context, if the host attached one (none for a trial run). */
export function carryOf(ctx: PolicyContext): TickCarry | undefined {
  return CARRIES.get(ctx);
}

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const text = (v: unknown): string => String(v).slice(0, MAX_TEXT);
const clamp = (v: unknown, lo: number, hi: number, def: number): number => (finite(v) ? Math.min(hi, Math.max(lo, v)) : def);

/**
 * Checks what the sandbox answered (JSON from policy code) and keeps the valid parts.
 * @param raw the parsed `state` field of the sandbox's answer
 * @param known upstream ids of the evaluation
 */
export function tickOutputOf(raw: unknown, known: ReadonlySet<string>): TickOutput {
  const out: TickOutput = {};
  if (raw === null || typeof raw !== 'object') return out;
  const o = raw as Record<string, unknown>;
  const s = o.sticky as Record<string, unknown> | null | undefined;
  const scope = STICKY_SCOPES.find((x) => x === s?.scope) ?? 'network';
  if (s && typeof s.primary === 'string' && known.has(s.primary) && finite(s.lastSwitchAt))
    out.sticky = { scope, primary: s.primary, lastSwitchAt: s.lastSwitchAt };
  const p = o.probe as Record<string, unknown> | null | undefined;
  if (p && typeof p === 'object') {
    const L = PROBE_LIMITS;
    out.probe = {
      sampleRate: clamp(p.sampleRate, 0, 1, 0.1),
      minSamples: Math.floor(clamp(p.minSamples, 0, L.minSamples, 10)),
      minSamplesWindowMs: clamp(p.minSamplesWindowMs, 1, L.windowMs, 60_000),
      maxConcurrent: Math.floor(clamp(p.maxConcurrent, 1, L.maxConcurrent, 4)),
      timeoutMs: clamp(p.timeoutMs, 1, L.timeoutMs, 10_000),
    };
  }
  const sh = o.shadow as Record<string, unknown> | null | undefined;
  if (sh && typeof sh === 'object') {
    for (const [id, reasons] of Object.entries(sh)) {
      if (!known.has(id) || !Array.isArray(reasons)) continue;
      (out.shadow ??= {})[id] = reasons.slice(0, MAX_REASONS).map(text);
    }
  }
  if (Array.isArray(o.notes)) {
    out.notes = (o.notes as unknown[])
      .slice(0, MAX_NOTES)
      .filter((n): n is Record<string, unknown> => n !== null && typeof n === 'object' && known.has((n as { upstream?: unknown }).upstream as string))
      .map((n) => ({ step: text(n.step), upstream: n.upstream as string, reason: text(n.reason) }));
  }
  return out;
}

/** Registers kept per network: four `stickyPrimary` scopes for each evaluation scope it can have. */
const MAX_REGISTERS = 4 * 65;

/**
 * A network's sticky primary registers, by `stickyPrimary` scope and the part of the evaluation
 * scope it keys on (eRPC's keying: `network` is one register, `network-method` one per method...).
 * Bounded: past {@link MAX_REGISTERS}, the register written longest ago goes.
 */
export class StickyRegisters {
  private readonly map = new Map<string, StickyRegister>();

  /** The key of a `stickyPrimary` scope for an evaluation of (method, finality). */
  static key(scope: (typeof STICKY_SCOPES)[number], method: string, finality: string): string {
    return `${scope}\u0000${scope.includes('method') ? method : '*'}\u0000${scope.includes('finality') ? finality : '*'}`;
  }

  /** The register under a {@link StickyRegisters.key}, or null before any `stickyPrimary` wrote it. */
  get(key: string): StickyRegister | null {
    return this.map.get(key) ?? null;
  }

  /** Writes a register (the most recently written kept under the bound). */
  set(key: string, r: StickyRegister): void {
    this.map.delete(key);
    this.map.set(key, r);
    if (this.map.size > MAX_REGISTERS) this.map.delete(this.map.keys().next().value as string);
  }
}

/** The cross-tick state of one evaluation scope's YAML policy. */
export class SelectionMemory {
  /** Evaluations committed so far. */
  private ticks = 0;
  /** `probeExcluded` settings of the last committed evaluation (undefined: no probing). */
  probe?: ProbeSettings;

  /**
   * @param excludedSince the scope's exclusion clock (upstream id -> epoch ms), kept by the selection state after each evaluation
   * @param registers the network's sticky registers (shared by its scopes)
   * @param method the evaluation scope's method (`*` for the network's)
   * @param finality the evaluation scope's finality (`unknown` for the network's)
   */
  constructor(
    private readonly excludedSince: ReadonlyMap<string, number>,
    private readonly registers = new StickyRegisters(),
    private readonly method = '*',
    private readonly finality = 'unknown',
  ) {}

  private keyOf(scope: (typeof STICKY_SCOPES)[number]): string {
    return StickyRegisters.key(scope, this.method, this.finality);
  }

  /** The carry of the next evaluation. @param previousOrder the order of the last committed evaluation */
  carry(previousOrder: readonly string[]): TickCarry {
    const stickies = Object.fromEntries(STICKY_SCOPES.map((s) => [s, this.registers.get(this.keyOf(s))])) as TickCarry['stickies'];
    return { sticky: stickies.network, stickies, excludedSince: Object.fromEntries(this.excludedSince), previousOrder, tickCount: this.ticks };
  }

  /** The `network` sticky register (null before a policy called `stickyPrimary`). */
  get register(): StickyRegister | null {
    return this.registers.get(this.keyOf('network'));
  }

  /**
   * Keeps what a committed evaluation left and returns the decisions to record with its own:
   * the helpers' notes and one `shadowExcludeIf` decision per upstream it would have excluded.
   */
  commit(carry: TickCarry): DecisionDraft[] {
    this.ticks++;
    const out = carry.out;
    this.probe = out?.probe;
    if (!out) return [];
    if (out.sticky) this.registers.set(this.keyOf(out.sticky.scope), { primary: out.sticky.primary, lastSwitchAt: out.sticky.lastSwitchAt });
    const notes = out.notes ? [...out.notes] : [];
    for (const [id, reasons] of Object.entries(out.shadow ?? {}))
      notes.push({ step: 'shadowExcludeIf', upstream: id, reason: `would exclude (not applied): ${reasons.join('; ')}` });
    return notes;
  }
}

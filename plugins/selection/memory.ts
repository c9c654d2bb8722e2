/**
 * What a YAML selection policy remembers from one evaluation to the next (eRPC's cross-tick
 * state: the sticky primary register, `excludedSince`, the previous order), although each
 * evaluation runs in a fresh node:vm context: the host hands it in as a {@link TickCarry} with
 * the evaluation and reads what the policy left in `carry.out` once the evaluation committed.
 * One {@link SelectionMemory} per network; a config reload that replaces the network starts a
 * fresh one. No hooks here.
 */
import type { PolicyContext } from './api.ts';
import type { DecisionDraft } from './view.ts';

/** The sticky primary register of a network (eRPC's `stickyPrimary`, every scope maps to the network). */
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
  /** The register after the evaluation, when `stickyPrimary` ran. */
  sticky?: StickyRegister;
  /** Present when the policy called `probeExcluded` without `reAdmitAfter`. */
  probe?: ProbeSettings;
  /** Upstream id -> reasons `shadowExcludeIf` would have excluded it for. */
  shadow?: Record<string, string[]>;
  /** Decisions the helpers record (sticky holds and switches, re-admissions). */
  notes?: DecisionDraft[];
}

/** The cross-tick state handed to one evaluation, and what it answered. */
export interface TickCarry {
  readonly sticky: StickyRegister | null;
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
  if (s && typeof s.primary === 'string' && known.has(s.primary) && finite(s.lastSwitchAt)) out.sticky = { primary: s.primary, lastSwitchAt: s.lastSwitchAt };
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

/** The cross-tick state of one network's YAML policy. */
export class SelectionMemory {
  private sticky: StickyRegister | null = null;
  /** Evaluations committed so far. */
  private ticks = 0;
  /** `probeExcluded` settings of the last committed evaluation (undefined: no probing). */
  probe?: ProbeSettings;

  /** @param excludedSince the network's exclusion clock (upstream id -> epoch ms), kept by the selection state after each evaluation */
  constructor(private readonly excludedSince: ReadonlyMap<string, number>) {}

  /** The carry of the next evaluation. @param previousOrder the order of the last committed evaluation */
  carry(previousOrder: readonly string[]): TickCarry {
    return { sticky: this.sticky, excludedSince: Object.fromEntries(this.excludedSince), previousOrder, tickCount: this.ticks };
  }

  /** The current sticky register (null before a policy called `stickyPrimary`). */
  get register(): StickyRegister | null {
    return this.sticky;
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
    if (out.sticky) this.sticky = out.sticky;
    const notes = out.notes ? [...out.notes] : [];
    for (const [id, reasons] of Object.entries(out.shadow ?? {}))
      notes.push({ step: 'shadowExcludeIf', upstream: id, reason: `would exclude (not applied): ${reasons.join('; ')}` });
    return notes;
  }
}

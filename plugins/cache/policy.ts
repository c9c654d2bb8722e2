/**
 * Cache policy matching: which policies a call may be read from and written
 * to. Reads: a finalized call may be served by finalized or unfinalized policies, a realtime
 * call only by realtime ones, an unknown call by any. Writes go only to policies of exactly the
 * call's finality, and respect the empty rule and the size bounds.
 */
import type { Finality } from 'svc-proxy/plugin';
import { compileGlobs, type GlobTest } from 'svc-proxy/util';
import type { PolicyConfig } from './schema.ts';

/** Longest text a params matcher is tested against, characters (keeps matching linear and bounded). */
export const MAX_PARAM_MATCH_LENGTH = 4096;

/** A param matcher: a glob, or a structure matched key by key. */
type ParamTest = (v: unknown) => boolean;

function compileParam(m: unknown): ParamTest {
  if (typeof m === 'string') {
    const g = compileGlobs(m.split('|'));
    return (v) => {
      const s = typeof v === 'string' ? v : v === undefined ? '' : (JSON.stringify(v) ?? '');
      return s.length <= MAX_PARAM_MATCH_LENGTH && g(s);
    };
  }
  if (Array.isArray(m)) {
    const tests = m.map(compileParam);
    return (v) => Array.isArray(v) && tests.every((t, i) => t(v[i]));
  }
  if (m !== null && typeof m === 'object') {
    const tests = Object.entries(m as Record<string, unknown>).map(([k, sub]) => [k, compileParam(sub)] as const);
    return (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && tests.every(([k, t]) => t((v as Record<string, unknown>)[k]));
  }
  // Numbers, booleans, null: equal values only.
  return (v) => v === m;
}

/** A policy compiled for matching. */
export class Policy {
  private readonly network: GlobTest;
  private readonly method: GlobTest;
  private readonly params?: ParamTest;

  /** @param config the resolved policy */
  constructor(readonly config: PolicyConfig) {
    this.network = compileGlobs(config.network.split('|'));
    this.method = compileGlobs(config.method.split('|'));
    if (config.params && config.params.length > 0) {
      const tests = config.params.map(compileParam);
      this.params = (v) => {
        const list = Array.isArray(v) ? v : [];
        return tests.every((t, i) => t(list[i]));
      };
    }
  }

  /** Metric label and log name. */
  get id(): string {
    return this.config.id;
  }

  /** Connector id. */
  get connector(): string {
    return this.config.connector;
  }

  /** True when the policy covers a network (checked once per network). */
  coversNetwork(networkId: string): boolean {
    return this.network(networkId);
  }

  /** True when the policy covers a method (memoised per method by the caller). */
  coversMethod(method: string): boolean {
    return this.method(method);
  }

  /** True when the params match (always, without `params` matchers). */
  coversParams(params: unknown): boolean {
    return this.params === undefined || this.params(params);
  }

  /** May serve reads of a call of this finality. */
  readable(f: Finality): boolean {
    if (this.config.appliesTo === 'set') return false;
    const p = this.config.finality;
    if (f === 'unknown') return true;
    if (f === 'finalized') return p === 'finalized' || p === 'unfinalized';
    return p === f;
  }

  /**
   * May store an answer.
   * @param f the call's finality after re-classification
   * @param empty whether the result is empty
   * @param size bytes of the result's JSON
   */
  writable(f: Finality, empty: boolean, size: number): boolean {
    const c = this.config;
    if (c.appliesTo === 'get' || c.finality !== f) return false;
    if (c.empty === 'ignore' ? empty : c.empty === 'only' ? !empty : false) return false;
    if (c.minItemSize !== undefined && size < c.minItemSize) return false;
    if (c.maxItemSize !== undefined && size > c.maxItemSize) return false;
    return true;
  }
}

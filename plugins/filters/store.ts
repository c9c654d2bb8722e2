/**
 * Where filters live. A filter is a small JSON cursor ({@link FilterState}), so it can live
 * anywhere: in this replica's memory by default, or, with the top-level `sharedState`, in that
 * Redis (`<clusterKey>:filter:<id>`, expiring after the idle timeout, set again by each poll), so
 * a filter made on one replica is polled on another.
 *
 * Writes are compare-and-set ({@link FilterStore.update}): each stored filter carries a `seq`,
 * and a poll stores its cursor only while the filter is still the one it read, so a poll that
 * overran its lock (another replica polled the same cursor since) or a filter uninstalled
 * meanwhile is never overwritten: the stale poll delivers nothing, an uninstalled filter stays
 * gone.
 *
 * Bounds are counted per replica by a {@link FilterLedger} (filters this replica made or served,
 * each until its idle timeout): in memory that is every filter; in Redis a replica counts the
 * filters it saw, which keeps one client from filling any one replica.
 */
import { randomBytes } from 'node:crypto';
import type { SharedValues } from 'svc-proxy/plugins/shared-state';
import type { LogCriteria } from './params.ts';
import { isFilterState } from './validate.ts';
import type { WindowBlock } from './cursor.ts';

/** What a filter delivers: logs, block hashes, or an upstream's pending transactions. */
export type FilterKind = 'logs' | 'blocks' | 'pending';

/** One filter, as stored (JSON). */
export interface FilterState {
  /** Shape version. */
  v: 1;
  /** What it delivers. */
  kind: FilterKind;
  /** Writes so far (0 when made): a write over a filter whose `seq` moved since it was read is refused. */
  seq: number;
  /** Who may poll it: `user:<id>` or `addr:<client address>`. */
  owner: string;
  /** `<project>/<network id>` it was made on. */
  net: string;
  /** A log filter's criteria. */
  criteria?: LogCriteria;
  /** Recent delivered blocks, oldest first; the last is the cursor (log and block filters). */
  window?: WindowBlock[];
  /** The upstream holding a pending-transaction filter, and its own id there. */
  upstream?: { id: string; filter: string };
}

/** A store of filters by id. Every operation may throw when a remote store is unreachable. */
export interface FilterStore {
  /** The filter, or undefined when unknown or expired. */
  get(id: string): Promise<FilterState | undefined>;
  /**
   * Stores a new filter until it is idle for `ttlMs`.
   * @param id a new, random filter id
   * @param state the filter, `seq` 0
   * @param ttlMs idle timeout, ms
   */
  create(id: string, state: FilterState, ttlMs: number): Promise<void>;
  /**
   * Stores `next` (with `seq` one above `prior`'s) until it is idle for `ttlMs`, only while the
   * stored filter is still `prior` as read by {@link get} (compare-and-set).
   * @param prior the filter as read
   * @param next what to store; `prior` itself to only start the idle timeout over
   * @param ttlMs idle timeout, ms
   * @returns false when another poll stored it since, or it was uninstalled or expired
   */
  update(id: string, prior: FilterState, next: FilterState, ttlMs: number): Promise<boolean>;
  /** Removes a filter; true when it was there. */
  delete(id: string): Promise<boolean>;
  /**
   * Takes the filter's poll lock for `ttlMs` (a store shared by replicas: a poll on another
   * replica at the same time must not deliver the same changes); absent: one replica only. The
   * lock holds a random token and its release removes only that token's lock, so a poll that
   * overran `ttlMs` never removes a lock another poll took since ({@link update} refuses its write).
   * @param ttlMs how long the lock holds without a release, ms
   * @returns a release function, or undefined when another poll holds it
   */
  lock?(id: string, ttlMs: number): Promise<(() => Promise<void>) | undefined>;
}

/** Longest an expired filter keeps counting against the bounds before the ledger scans, ms. */
export const LEDGER_SWEEP_MS = 1000;

/** One filter as the ledger counts it. */
interface LedgerEntry {
  /** {@link FilterState.owner}. */
  owner: string;
  /** {@link FilterState.net}. */
  net: string;
  /** {@link FilterState.kind}. */
  kind: FilterKind;
  /** Bytes of delivered logs it keeps for reorgs (as last stored by this replica). */
  kept: number;
  /** Expiry, ms since the epoch. */
  expiresAt: number;
}

/**
 * The filters this replica knows, for its bounds, its budget of kept logs and its gauge; expired
 * entries go lazily and on {@link sweep}. Counts per network and owner are kept as entries come
 * and go, so checking a bound costs no scan.
 */
export class FilterLedger {
  private readonly entries = new Map<string, LedgerEntry>();
  /** Live entries per network, and per network and owner (`<net>\0<owner>`). */
  private readonly perNet = new Map<string, number>();
  private readonly perOwner = new Map<string, number>();
  private keptTotal = 0;
  private sweptAt = Number.NEGATIVE_INFINITY;

  /** @param now clock, ms (tests drive it) */
  constructor(private readonly now: () => number = () => Date.now()) {}

  /**
   * Records (or refreshes) a filter.
   * @param owner who may poll it
   * @param net `<project>/<network id>`
   * @param ttlMs idle timeout, ms
   * @param kept bytes of delivered logs it keeps (default: as recorded before, else 0)
   */
  touch(id: string, owner: string, net: string, kind: FilterKind, ttlMs: number, kept?: number): void {
    const before = this.entries.get(id);
    this.forget(id);
    const e: LedgerEntry = { owner, net, kind, kept: kept ?? before?.kept ?? 0, expiresAt: this.now() + ttlMs };
    this.entries.set(id, e);
    bump(this.perNet, net, 1);
    bump(this.perOwner, `${net}\0${owner}`, 1);
    this.keptTotal += e.kept;
  }

  /** Forgets a filter. */
  forget(id: string): void {
    const e = this.entries.get(id);
    if (!e) return;
    this.entries.delete(id);
    bump(this.perNet, e.net, -1);
    bump(this.perOwner, `${e.net}\0${e.owner}`, -1);
    this.keptTotal -= e.kept;
  }

  /** Whether the ledger holds the id, unexpired. */
  has(id: string): boolean {
    const e = this.entries.get(id);
    return e !== undefined && e.expiresAt > this.now();
  }

  /**
   * Live filters of one network: in total and of one owner.
   * @param net `<project>/<network id>`
   * @param owner who holds them
   */
  count(net: string, owner: string): { total: number; owned: number } {
    // A scan at most every LEDGER_SWEEP_MS, not per creation: an expired filter counts that much longer at most.
    if (this.now() - this.sweptAt >= LEDGER_SWEEP_MS) this.sweep();
    return { total: this.perNet.get(net) ?? 0, owned: this.perOwner.get(`${net}\0${owner}`) ?? 0 };
  }

  /**
   * Bytes of delivered logs the filters of this replica keep, but the one of `except`.
   * @param except a filter id whose own bytes are left out (the one being stored)
   */
  keptBytes(except?: string): number {
    return this.keptTotal - (except !== undefined ? (this.entries.get(except)?.kept ?? 0) : 0);
  }

  /** Live filters by network and kind (the `svc_filters_active` gauge). */
  byNetwork(): Map<string, Record<FilterKind, number>> {
    this.sweep();
    const out = new Map<string, Record<FilterKind, number>>();
    for (const e of this.entries.values()) {
      let c = out.get(e.net);
      if (!c) out.set(e.net, (c = { logs: 0, blocks: 0, pending: 0 }));
      c[e.kind]++;
    }
    return out;
  }

  /**
   * Drops expired entries.
   * @returns the ids dropped
   */
  sweep(): string[] {
    const now = this.now();
    this.sweptAt = now;
    const gone: string[] = [];
    for (const [id, e] of this.entries) if (e.expiresAt <= now) gone.push(id);
    for (const id of gone) this.forget(id);
    return gone;
  }
}

function bump(m: Map<string, number>, key: string, by: number): void {
  const n = (m.get(key) ?? 0) + by;
  if (n <= 0) m.delete(key);
  else m.set(key, n);
}

/** Filters in this replica's memory; each expires when idle (checked on read and by {@link sweep}). */
export class MemoryFilterStore implements FilterStore {
  private readonly filters = new Map<string, { json: string; seq: number; expiresAt: number }>();

  /** @param now clock, ms (tests drive it) */
  constructor(private readonly now: () => number = () => Date.now()) {}

  /** {@inheritDoc FilterStore.get} */
  get(id: string): Promise<FilterState | undefined> {
    const e = this.filters.get(id);
    if (!e) return Promise.resolve(undefined);
    if (e.expiresAt <= this.now()) {
      this.filters.delete(id);
      return Promise.resolve(undefined);
    }
    // A copy: a poll works on its own state and stores it when done.
    return Promise.resolve(JSON.parse(e.json) as FilterState);
  }

  /** {@inheritDoc FilterStore.create} */
  create(id: string, state: FilterState, ttlMs: number): Promise<void> {
    this.filters.set(id, { json: JSON.stringify(state), seq: state.seq, expiresAt: this.now() + ttlMs });
    return Promise.resolve();
  }

  /** {@inheritDoc FilterStore.update} */
  update(id: string, prior: FilterState, next: FilterState, ttlMs: number): Promise<boolean> {
    const e = this.filters.get(id);
    if (!e || e.expiresAt <= this.now() || e.seq !== prior.seq) return Promise.resolve(false);
    const stored = { ...next, seq: prior.seq + 1 };
    this.filters.set(id, { json: JSON.stringify(stored), seq: stored.seq, expiresAt: this.now() + ttlMs });
    return Promise.resolve(true);
  }

  /** {@inheritDoc FilterStore.delete} */
  delete(id: string): Promise<boolean> {
    return Promise.resolve(this.filters.delete(id));
  }

  /** Drops expired filters (a timer calls it, so abandoned filters free their memory). */
  sweep(): void {
    const now = this.now();
    for (const [id, e] of this.filters) if (e.expiresAt <= now) this.filters.delete(id);
  }

  /** Filters held (expired ones not yet swept included). */
  get size(): number {
    return this.filters.size;
  }
}

/** Filters in the shared-state Redis (see the module comment); a malformed entry reads as no filter. */
export class SharedFilterStore implements FilterStore {
  /** The text each filter was read from, for the compare-and-set of {@link update}. */
  private readonly read = new WeakMap<FilterState, string>();

  /** @param values the shared-state plugin's key-value service (or the primary's, `server.workers`) */
  constructor(private readonly values: SharedValues) {}

  /** {@inheritDoc FilterStore.get} */
  async get(id: string): Promise<FilterState | undefined> {
    let text: string | undefined;
    try {
      text = await this.values.get(`filter:${id}`);
    } catch (e) {
      // An entry over the size bound is not a filter svc wrote.
      if (e instanceof RangeError) return undefined;
      throw e;
    }
    if (text === undefined) return undefined;
    try {
      const s = JSON.parse(text) as FilterState;
      if (!isFilterState(s)) return undefined;
      this.read.set(s, text);
      return s;
    } catch {
      return undefined;
    }
  }

  /** {@inheritDoc FilterStore.create} */
  create(id: string, state: FilterState, ttlMs: number): Promise<void> {
    return this.values.set(`filter:${id}`, JSON.stringify(state), ttlMs);
  }

  /** {@inheritDoc FilterStore.update} */
  update(id: string, prior: FilterState, next: FilterState, ttlMs: number): Promise<boolean> {
    const expected = this.read.get(prior) ?? JSON.stringify(prior);
    return this.values.replace(`filter:${id}`, expected, JSON.stringify({ ...next, seq: prior.seq + 1 }), ttlMs);
  }

  /** {@inheritDoc FilterStore.delete} */
  delete(id: string): Promise<boolean> {
    return this.values.delete(`filter:${id}`);
  }

  /** {@inheritDoc FilterStore.lock} */
  async lock(id: string, ttlMs: number): Promise<(() => Promise<void>) | undefined> {
    const key = `filter:${id}:poll`;
    const token = randomBytes(16).toString('hex');
    if (!(await this.values.claim(key, ttlMs, token))) return undefined;
    return async () => {
      await this.values.release(key, token);
    };
  }
}

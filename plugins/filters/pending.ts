/**
 * Pending-transaction filters: `eth_newPendingTransactionFilter` passed through to one upstream
 * (the first of the selection, the next when it fails) and the filter's later calls sent to that
 * upstream only, with its own id there. Each call is the client's own (its slots kept) and carries
 * a provenance mark of its own, so multiplexing never shares it with another client's call of the
 * same params (another filter with the same node id elsewhere, another creation at the same time).
 */
import type { CallContext, CallHandler, RpcResult, Upstream } from 'svc-proxy/plugin';
import { ErrEndpointMissingData, SvcError } from 'svc-proxy/plugin/errors';
import { derivedState, markProvenance } from 'svc-proxy/plugins/multiplex';
import { ErrFilterNotFound, newFilterId } from './params.ts';
import type { FilterState } from './store.ts';

/** Upstreams tried for a new pending-transaction filter before the call fails. */
const PENDING_TRIES = 3;

/** Which upstream a pending-transaction filter's call may use (`select` tap). */
interface Pin {
  /** Its upstream: only that one. */
  upstream?: string;
  /** A new filter: the first candidate not excluded, recorded in `chosen`. */
  exclude?: Set<string>;
  /** A new filter: the upstream the `select` tap chose (set by the tap, read after the call). */
  chosen?: string;
}
const PIN = Symbol('filters.pin');

/**
 * A pending filter's call to one upstream, as the client's call (its slots kept), marked with a
 * provenance of its own.
 * @param mark unique to the filter and its upstream, or to one creation
 */
function pinnedCall(ctx: CallContext, pin: Pin, mark: string, request: CallContext['request']): CallContext {
  const state = derivedState(ctx);
  state.set(PIN, pin);
  const sub: CallContext = { ...ctx, request, state };
  markProvenance(sub, 'filters', mark);
  return sub;
}

/**
 * Makes the filter on the first selected upstream that answers, trying at most
 * {@link PENDING_TRIES} upstreams.
 * @param inner the call chain below the filters tap
 * @returns the upstream's id and the filter's id there
 */
export async function newPending(ctx: CallContext, inner: CallHandler): Promise<{ id: string; filter: string }> {
  const exclude = new Set<string>();
  for (let i = 1; ; i++) {
    const pin: Pin = { exclude };
    try {
      const r = await inner(pinnedCall(ctx, pin, `new:${newFilterId()}`, ctx.request));
      const remote = r.result;
      if (typeof remote !== 'string' || remote.length === 0 || remote.length > 130 || !pin.chosen)
        throw new ErrEndpointMissingData('eth_newPendingTransactionFilter: the upstream answered no filter id');
      return { id: pin.chosen, filter: remote };
    } catch (e) {
      const tried = pin.chosen;
      const retry = e instanceof SvcError && e.retryable && tried !== undefined && i < PENDING_TRIES;
      if (!retry) throw e;
      exclude.add(tried);
    }
  }
}

/**
 * A pending-transaction filter's call, sent to its upstream with the upstream's id; any failure
 * ends the filter.
 * @param id svc's id of the filter
 * @param method `eth_getFilterChanges` or `eth_uninstallFilter`
 * @param drop removes the filter (store and ledger)
 * @throws ErrFilterNotFound when its upstream left the network or failed (the filter is dropped)
 */
export async function pendingCall(
  ctx: CallContext,
  id: string,
  s: FilterState,
  method: string,
  inner: CallHandler,
  drop: (id: string) => Promise<unknown>,
): Promise<RpcResult> {
  const up = s.upstream as { id: string; filter: string };
  if (!ctx.network.upstreams.some((u: Upstream) => u.id === up.id)) {
    await drop(id);
    throw new ErrFilterNotFound();
  }
  try {
    // The svc id first: the mark is cut at 256 characters, and the svc id alone is unique.
    return await inner(pinnedCall(ctx, { upstream: up.id }, `${id}:${up.filter}@${up.id}`, { ...ctx.request, method, params: [up.filter] }));
  } catch {
    // The node restarted, died or forgot the filter: it is gone, and the client makes a new one.
    await drop(id);
    throw new ErrFilterNotFound();
  }
}

/**
 * The `select` tap: a pending filter's call may use only its upstream; a new one the first
 * candidate not excluded (recorded in the pin's `chosen`). Other calls are left alone.
 */
export function pendingSelect(ups: Upstream[], ctx: CallContext): Upstream[] {
  const pin = ctx.state.get(PIN) as Pin | undefined;
  if (!pin) return ups;
  if (pin.upstream !== undefined) return ups.filter((u) => u.id === pin.upstream);
  const first = ups.find((u) => !pin.exclude?.has(u.id));
  pin.chosen = first?.id;
  return first ? [first] : [];
}

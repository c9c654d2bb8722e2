/**
 * The start-up window of a network's head: until some upstream's head is vouched for (corroborated by a second upstream, or the
 * network's only source), a client's head call would be answered by whichever upstream happens to answer first, and a liar could
 * set what every client is served. Such a call waits, bounded, for the first vouched head, so it is judged like every later one.
 */
import type { NetworkChainState } from './chain.ts';

/** Longest a client's head call waits at start-up for the network's first vouched head, ms. */
export const FIRST_VOUCH_WAIT_MS = 2000;

const waiters = new WeakMap<NetworkChainState, Set<() => void>>();

/**
 * Resolves once the network has a vouched head, or after `ms` (whichever first); at once when it has one already.
 * @param ms the bound, ms (the caller passes the least of {@link FIRST_VOUCH_WAIT_MS} and its call's time left)
 */
export function whenVouched(st: NetworkChainState, ms: number): Promise<void> {
  if (st.anyVouched || ms <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    let set = waiters.get(st);
    if (!set) waiters.set(st, (set = new Set()));
    const done = () => {
      clearTimeout(timer);
      set.delete(done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    set.add(done);
  });
}

/** Wakes every call waiting for the network's first vouched head (called when an upstream's head is first vouched). */
export function vouched(st: NetworkChainState): void {
  const set = waiters.get(st);
  if (!set) return;
  waiters.delete(st);
  for (const done of set) done();
}

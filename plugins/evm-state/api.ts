/**
 * `svc/plugins/evm-state`: what the evm-state plugin offers other plugins besides the chain state
 * (`CHAIN_STATE_SERVICE`, on `svc/plugin/contracts`): which upstreams it polls, and each
 * upstream's syncing flag.
 */
import { serviceKey, Slot, type ServiceKey, type Upstream } from 'svc/plugin';

/**
 * Key of the upstreams a state poller runs for (the evm-state plugin; an upstream with
 * `evm.statePollerInterval: 0` has none). The healthcheck counts such an upstream initialised
 * only once its first poll came in; the values are the evm-state plugin's own.
 */
export const STATE_POLLERS_SERVICE: ServiceKey<ReadonlyMap<Upstream, unknown>> = serviceKey<ReadonlyMap<Upstream, unknown>>('evm-state.pollers');

/**
 * Upstream slot `evm.syncing`: the upstream's syncing flag, written by the evm-state poller, read
 * by the default selection policy, which excludes a syncing upstream.
 */
export const SYNCING = new Slot<boolean>('evm.syncing', false);

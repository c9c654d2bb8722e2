/**
 * `svc-proxy/plugins/shadow`: the upstream slot marking a shadow upstream, which serves no client call
 * and does not count towards the network head (read by evm-state).
 */
import { Slot } from 'svc-proxy/plugin';

/**
 * Upstream slot `shadow.upstream`: true on a shadow upstream (the shadow plugin), which serves
 * no client call and does not count towards the network head (evm-state).
 */
export const SHADOW_UPSTREAM = new Slot<boolean>('shadow.upstream', false);

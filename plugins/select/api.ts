/**
 * `svc-proxy/plugins/select`: the record slot the select plugin writes for a pinned call, read by the
 * headers plugin (`X-SVC-Upstream-Lag`).
 */
import { Slot } from 'svc-proxy/plugin';

/**
 * Record slot `select.upstreamLag`: blocks a pinned call's upstream was behind the network head
 * (written by select; `X-SVC-Upstream-Lag` shows a batch's largest).
 */
export const UPSTREAM_LAG = new Slot<number>('select.upstreamLag', 0);

/**
 * The minimal preset: forwarding only. A reference for people writing their own presets —
 * no directives, no diagnostics, no metrics; upstreams are tried in config order.
 */
import type { Plugin } from '../core/host/proxy.ts';
import { evmErrorsPlugin } from '../plugins/evm-errors/index.ts';
import { outboundPlugin } from '../plugins/outbound/index.ts';
import { compressionPlugin } from '../plugins/compression/index.ts';
import { tlsPlugin } from '../plugins/tls/index.ts';
import { forwardPlugin } from '../plugins/forward/index.ts';
import { selectPlugin } from '../plugins/select/index.ts';

/** Plugins of the forwarding-only server. */
export function minimalPreset(): Plugin[] {
  return [selectPlugin(), forwardPlugin(), evmErrorsPlugin(), outboundPlugin(), compressionPlugin(), tlsPlugin()];
}

/**
 * evm-errors plugin (spec §7): names what EVM nodes and their vendors answer when they fail (a revert, a range too large, a rate
 * limit, missing state, a nonce or funds problem) so the failsafe knows what to retry, blame charges only the upstream's own faults
 * and the client gets a stable code. Taps `upstreamFault`, which runs only for error answers: a result costs nothing here.
 */
import { definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import { classifyEvmFault } from './rules.ts';

export { classifyEvmFault, ERROR_STRING_SELECTOR, NORMALISATION_RULES } from './rules.ts';

/** @returns the plugin tapping `upstreamFault` with the EVM rule table (plugins/evm-errors/rules.ts) */
export function evmErrorsPlugin(): Plugin {
  return definePlugin({
    name: 'evm-errors',
    apply(host: PluginHost) {
      host.hooks.upstreamFault.tap('evm-errors', classifyEvmFault);
    },
  });
}

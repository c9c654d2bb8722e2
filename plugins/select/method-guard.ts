/**
 * The node-administration deny list of the select plugin. A proxy that forwards whatever a client
 * sends lets anyone mine blocks, revert snapshots, rewind the chain, add peers or sign with the
 * node's keys, unauthenticated: `anvil_*`, `evm_*`, `debug_setHead`, `admin_*`, `personal_*`...
 * These methods are refused before any upstream is dialled unless the network's `allowMethods`
 * or an upstream's own `allowMethods` names them.
 */
import { type Network, type SchemaFragment, Type, type Upstream } from 'svc-proxy/plugin';
import { ErrUpstreamMethodIgnored, ErrUpstreamsExhausted } from 'svc-proxy/plugin/errors';
import { compileGlobs, type GlobTest } from 'svc-proxy/util';

/**
 * Methods svc does not forward unless allowed (globs, lib/glob.ts syntax). An entry starting with
 * `!` takes matching names back out of the list: a method is denied when some plain entry matches
 * it and no `!` entry does.
 *
 * Reads stay forwarded: `txpool_content`/`contentFrom`/`inspect`/`status` (and Besu's
 * `txpool_besu*`) show the public mempool and many indexers poll them; `clique_get*`,
 * `clique_status` and `parlia_get*` read the signer set; tracing (`debug_trace*`, `trace_*`)
 * is untouched. `eth_accounts` and `eth_sign` are refused earlier by the evm-methods plugin.
 */
export const DEFAULT_DENIED_METHODS: readonly string[] = Object.freeze([
  // Devnet control: mine, snapshot/revert, time travel, set balances, code and storage, impersonation.
  'anvil_*',
  'hardhat_*',
  'evm_*',
  'tenderly_set*',
  'tenderly_addBalance',
  // The node process, its peers, its block production and the consensus-layer API.
  'admin_*',
  'miner_*',
  'les_*',
  'engine_*',
  'parity_set*',
  // Keys held by the node: signing and sending from its accounts.
  'personal_*',
  'eth_sendTransaction',
  'eth_signTransaction',
  'eth_signTypedData*',
  // debug_*: rewinding the chain, changing or profiling the node process, writing files on it.
  'debug_set*',
  'debug_start*',
  'debug_stop*',
  'debug_write*',
  'debug_cpuProfile',
  'debug_blockProfile',
  'debug_mutexProfile',
  'debug_goTrace',
  'debug_verbosity',
  'debug_vmodule',
  'debug_backtraceAt',
  'debug_freeOSMemory',
  'debug_chaindbCompact',
  // Legacy local storage and messaging.
  'db_*',
  'shh_*',
  // Pool management, except the public reads.
  'txpool_*',
  '!txpool_content',
  '!txpool_contentFrom',
  '!txpool_inspect',
  '!txpool_status',
  '!txpool_besu*',
  // Proof-of-authority votes (clique_propose, clique_discard...), except the reads.
  'clique_*',
  '!clique_get*',
  '!clique_status',
  'parlia_*',
  '!parlia_get*',
]);

/** Most method verdicts cached per list (method names come from clients). */
const MAX_CACHED_VERDICTS = 1000;

/** A bounded cache of a per-method boolean over a glob test: method names come from clients. */
class VerdictCache {
  private readonly seen = new Map<string, boolean>();
  /** @param test the uncached verdict */
  constructor(private readonly test: (method: string) => boolean) {}
  /** The verdict for a method (cached while fewer than {@link MAX_CACHED_VERDICTS} are). */
  get(method: string): boolean {
    let v = this.seen.get(method);
    if (v === undefined) {
      v = this.test(method);
      if (this.seen.size < MAX_CACHED_VERDICTS) this.seen.set(method, v);
    }
    return v;
  }
}

/**
 * Compiles a deny list (`!` entries take names back out).
 * @param list globs as in {@link DEFAULT_DENIED_METHODS}; `[]` denies nothing
 * @returns a test: true when the method is denied
 * @throws TypeError when the list is not an array of strings
 */
export function compileDenyList(list: readonly string[]): GlobTest {
  if (!Array.isArray(list) || list.some((m) => typeof m !== 'string')) throw new TypeError('deniedMethods must be an array of method globs');
  const plain = list.filter((g) => !g.startsWith('!'));
  const back = list.filter((g) => g.startsWith('!')).map((g) => g.slice(1));
  if (plain.length === 0) return () => false;
  const deny = compileGlobs(plain);
  const keep = back.length ? compileGlobs(back) : undefined;
  return keep ? (m) => deny(m) && !keep(m) : deny;
}

/** A glob that is only `*`s: it names no method family. */
const WILDCARD_ONLY = /^\*+$/;

/**
 * The test of an upstream's `allowMethods` that lifts the deny list for it: its globs minus the
 * bare `*` (an upstream that "allows everything" keeps the deny list; a family must be named,
 * e.g. `anvil_*`).
 * @param allowMethods the upstream's resolved `allowMethods`
 */
export function explicitAllowOf(allowMethods: readonly string[]): GlobTest {
  const named = allowMethods.filter((g) => !WILDCARD_ONLY.test(g));
  return named.length ? compileGlobs(named) : () => false;
}

/** Schema of the select plugin's network key (`networks[].allowMethods`, `networkDefaults.allowMethods`). */
export const methodGuardSchema: SchemaFragment = {
  network: {
    allowMethods: Type.Array(Type.String(), {
      description:
        'method globs lifted from the node-administration deny list on this network (`anvil_*`, `evm_*`, `debug_setHead`, `admin_*`, `personal_*`, `eth_sendTransaction`...); `["*"]` forwards them all. Other methods are not affected',
    }),
  },
};

/**
 * Decides, per call, whether a method may reach the upstreams of a network (the select plugin's
 * `select:methods` tap asks it). Verdicts are cached per method, bounded.
 */
export class MethodGuard {
  private readonly denied: VerdictCache;
  private readonly networks = new WeakMap<Network, VerdictCache>();
  private readonly upstreams = new WeakMap<Upstream, VerdictCache>();

  /** @param deniedMethods the deny list ({@link DEFAULT_DENIED_METHODS} by default) */
  constructor(deniedMethods: readonly string[] = DEFAULT_DENIED_METHODS) {
    this.denied = new VerdictCache(compileDenyList(deniedMethods));
  }

  /**
   * True when the method is on the deny list and the network's `allowMethods` does not lift it:
   * only upstreams whose own `allowMethods` names it may serve it.
   */
  restricted(network: Network, method: string): boolean {
    if (!this.denied.get(method)) return false;
    let allow = this.networks.get(network);
    if (!allow) {
      const globs = network.config.settings.allowMethods;
      const list = Array.isArray(globs) ? (globs as string[]) : [];
      allow = new VerdictCache(list.length ? compileGlobs(list) : () => false);
      this.networks.set(network, allow);
    }
    return !allow.get(method);
  }

  /** True when the upstream's own `allowMethods` names the method (a bare `*` does not). */
  upstreamAllows(u: Upstream, method: string): boolean {
    let allow = this.upstreams.get(u);
    if (!allow) {
      allow = new VerdictCache(explicitAllowOf(u.config.allowMethods));
      this.upstreams.set(u, allow);
    }
    return allow.get(method);
  }

  /**
   * The candidates that may serve a restricted method: those that serve it at all
   * (`ignoreMethods`/`allowMethods`) and whose `allowMethods` names it.
   * @param ups the candidates so far
   * @param network the call's network
   * @param method the method
   * @throws ErrUpstreamMethodIgnored when no upstream of the network allows it (nothing is dialled)
   * @throws ErrUpstreamsExhausted when some upstream allows it but none of them is a candidate now
   */
  filter(ups: readonly Upstream[], network: Network, method: string): Upstream[] {
    const out: Upstream[] = [];
    for (const u of ups) if (u.supportsMethod(method) && this.upstreamAllows(u, method)) out.push(u);
    if (out.length > 0) return out;
    const elsewhere = network.upstreams.filter((u) => u.supportsMethod(method) && this.upstreamAllows(u, method)).map((u) => u.id);
    if (elsewhere.length > 0)
      throw new ErrUpstreamsExhausted(
        [],
        `method ${method} is allowed only on upstreams ${elsewhere.join(', ')} of ${network.id}, and none of them is available`,
      );
    throw new ErrUpstreamMethodIgnored(
      `method ${method} is a node administration method: svc does not forward it on ${network.id} (allow it with allowMethods on the network or the upstream)`,
      { details: { method, network: network.id } },
    );
  }
}

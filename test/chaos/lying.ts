/**
 * The small deployments of hostile class 9 (lying upstreams): one anvil node behind three
 * lying proxies (test/helpers/lying-proxy.ts), which svc sees as three upstreams `a`, `b`, `c`
 * of network evm:31337. Behind one node the upstreams agree on every block hash, so a reorg is
 * one `anvil_reorg` and every disagreement is a lie told by a proxy. Each test starts its own
 * deployment (a lie must not outlive its test) and stops it in `finally`.
 */
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startLyingProxy, type LyingProxy } from '../helpers/lying-proxy.ts';
import { startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';

/** Chain id of the honest network. */
export const LYING_CHAIN = 31337;
/** Path of the network. */
export const LYING_PATH = `/main/evm/${LYING_CHAIN}`;
/** Upstream ids, in config (selection) order: `a` is the liar unless a test says otherwise. */
export const LYING_IDS = ['a', 'b', 'c'] as const;
/** A memory cache tier with finalized and unfinalized (60 s) policies. */
export const MEMORY_CACHE = {
  database: {
    evmJsonRpcCache: {
      connectors: [{ id: 'mem', driver: 'memory', memory: { maxItems: 10_000, maxTotalSize: '16MiB' } }],
      policies: [
        { connector: 'mem', finality: 'finalized' },
        { connector: 'mem', finality: 'unfinalized', ttl: '60s' },
      ],
    },
  },
};

/** A running class-9 deployment. */
export interface LyingDeployment {
  node: AnvilHandle;
  /** The proxies, in {@link LYING_IDS} order. */
  proxies: LyingProxy[];
  svc: SvcHandle;
  /** One JSON-RPC call to the network through svc. */
  rpc(method: string, params: unknown[]): Promise<SvcResponse>;
  stop(): Promise<void>;
}

/** What a class-9 deployment is built with. */
export interface LyingOptions {
  /** Blocks mined before svc starts (default 5). */
  blocks?: number;
  /** Extra top-level config keys (a cache, `server.websocket`, `sharedState`). */
  config?: Record<string, unknown>;
  /** Extra keys of the network entry (`failsafe`). */
  network?: Record<string, unknown>;
  /** Extra keys of one upstream entry, by id (e.g. `wsEndpoint`, another `statePollerInterval`). */
  upstream?: (id: string, proxy: LyingProxy) => Record<string, unknown>;
}

/**
 * Starts anvil, three lying proxies (telling the truth until told otherwise) and svc (default
 * preset, state poller every 100 ms); resolves once every upstream is ready.
 * @throws Error when a server does not start or an upstream is not ready within 10 s
 */
export async function startLying(opts: LyingOptions = {}): Promise<LyingDeployment> {
  const node = await startAnvil({ chainId: LYING_CHAIN });
  const proxies: LyingProxy[] = [];
  let svc: SvcHandle | undefined;
  const stop = async () => {
    await svc?.close().catch(() => undefined);
    await Promise.all(proxies.map((p) => p.close()));
    await node.stop();
  };
  try {
    await node.rpc('anvil_mine', [`0x${(opts.blocks ?? 5).toString(16)}`]);
    proxies.push(...(await Promise.all(LYING_IDS.map(() => startLyingProxy(node.url)))));
    svc = await startSvc({
      logLevel: 'error',
      ...opts.config,
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: LYING_CHAIN }, selectionPolicy: { evalInterval: '1h' }, ...opts.network }],
          upstreams: LYING_IDS.map((id, i) => ({
            id,
            endpoint: proxies[i]!.url,
            evm: { chainId: LYING_CHAIN, statePollerInterval: '100ms' },
            ...opts.upstream?.(id, proxies[i]!),
          })),
        },
      ],
    });
    const s = svc;
    await waitFor(() => LYING_IDS.every((id) => s.proxy.projects.get('main')!.upstreams.get(id)?.state === 'ready'), 10_000);
  } catch (e) {
    await stop();
    throw e;
  }
  const s = svc;
  return { node, proxies, svc: s, rpc: (method, params) => s.post(LYING_PATH, { jsonrpc: '2.0', id: 1, method, params }), stop };
}

/** `0x`-prefixed hex of a non-negative integer. */
export const hex = (n: number | bigint): string => `0x${n.toString(16)}`;

/**
 * Calls `send` until `stop` holds or `max` calls were made, collecting every answer.
 * @returns the answers in order
 */
export async function callUntil(send: () => Promise<SvcResponse>, stop: () => boolean, max: number): Promise<SvcResponse[]> {
  const out: SvcResponse[] = [];
  while (out.length < max && !stop()) out.push(await send());
  return out;
}

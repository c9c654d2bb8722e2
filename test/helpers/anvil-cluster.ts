/**
 * Starts N real anvil nodes as upstreams of one network, for tests that drive their heads apart
 * (`anvil_mine`, `evm_setAutomine`, `evm_mine`, `anvil_setBlockTimestampInterval`...). Every
 * node runs the same chain id from the same genesis; what each node mines afterwards is its own.
 */
import { startAnvil, type AnvilHandle, type AnvilOptions } from './anvil.ts';

/** Options of {@link startAnvilCluster}. */
export interface AnvilClusterOptions {
  /** Number of nodes (default 3). */
  count?: number;
  /** Chain id of every node (default 31337). */
  chainId?: number;
  /** Upstream ids, one per node (default `anvil-0`, `anvil-1`, ...). */
  ids?: string[];
  /** Seconds between mined blocks on every node; instant (auto) mining when unset. */
  blockTime?: number;
  /** Extra anvil arguments for every node. */
  args?: string[];
  /** Per-node overrides, by index (merged over the shared options). */
  perNode?: Array<Partial<AnvilOptions> | undefined>;
}

/** An upstream entry as a raw svc config holds it. */
export interface ClusterUpstream {
  id: string;
  endpoint: string;
  evm: { chainId: number; [key: string]: unknown };
  [key: string]: unknown;
}

/** A running set of anvil nodes. */
export interface AnvilCluster {
  /** The nodes, in id order. */
  nodes: AnvilHandle[];
  /** Upstream ids, one per node. */
  ids: string[];
  chainId: number;
  /** The node with that upstream id (or index). */
  node(which: string | number): AnvilHandle;
  /**
   * Raw svc upstream entries for the nodes, in order.
   * @param extra fields merged into every entry (`evm` is merged, not replaced)
   */
  upstreams(extra?: Record<string, unknown>): ClusterUpstream[];
  /** Mines `blocks` blocks on one node at once (`anvil_mine`). */
  mine(which: string | number, blocks?: number): Promise<void>;
  /** Turns automine on or off on one node (`evm_setAutomine`). */
  setAutomine(which: string | number, on: boolean): Promise<void>;
  /** Latest block number of one node, read directly (not through svc). */
  head(which: string | number): Promise<number>;
  /** Latest block numbers of every node, in order. */
  heads(): Promise<number[]>;
  /** Stops one node (it stays in the list, answering nothing). */
  stopNode(which: string | number): Promise<void>;
  /** Stops every node. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts `count` anvil nodes concurrently (each on a free port).
 * @param opts count, chain id, ids, block time, extra args
 * @throws Error when a node does not start; the others are stopped first
 */
export async function startAnvilCluster(opts: AnvilClusterOptions = {}): Promise<AnvilCluster> {
  const count = opts.count ?? opts.ids?.length ?? 3;
  const chainId = opts.chainId ?? 31337;
  const ids = opts.ids ?? Array.from({ length: count }, (_, i) => `anvil-${i}`);
  if (ids.length !== count) throw new Error(`startAnvilCluster: ${ids.length} ids for ${count} nodes`);
  const started = await Promise.allSettled(
    ids.map((_, i) =>
      startAnvil({ chainId, blockTime: opts.blockTime, ...(opts.perNode?.[i] ?? {}), args: [...(opts.args ?? []), ...(opts.perNode?.[i]?.args ?? [])] }),
    ),
  );
  const nodes: AnvilHandle[] = [];
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  for (const s of started) if (s.status === 'fulfilled') nodes.push(s.value);
  if (failed) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
  }
  const stopped = new Set<AnvilHandle>();
  const node = (which: string | number): AnvilHandle => {
    const i = typeof which === 'number' ? which : ids.indexOf(which);
    const n = nodes[i];
    if (!n) throw new Error(`no anvil node ${String(which)} in the cluster (${ids.join(', ')})`);
    return n;
  };
  const head = async (which: string | number) => Number.parseInt((await node(which).rpc('eth_blockNumber')) as string, 16);
  return {
    nodes,
    ids,
    chainId,
    node,
    upstreams: (extra = {}) =>
      nodes.map((n, i) => {
        const { evm, ...rest } = extra as { evm?: Record<string, unknown> };
        return { id: ids[i] as string, endpoint: n.url, ...rest, evm: { chainId, ...(evm ?? {}) } };
      }),
    mine: async (which, blocks = 1) => {
      await node(which).rpc('anvil_mine', [`0x${blocks.toString(16)}`]);
    },
    setAutomine: async (which, on) => {
      await node(which).rpc('evm_setAutomine', [on]);
    },
    head,
    heads: () => Promise.all(nodes.map((_, i) => head(i))),
    stopNode: async (which) => {
      const n = node(which);
      stopped.add(n);
      await n.stop();
    },
    stop: async () => {
      await Promise.all(nodes.filter((n) => !stopped.has(n)).map((n) => n.stop()));
      for (const n of nodes) stopped.add(n);
    },
  };
}

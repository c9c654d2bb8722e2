/**
 * Two (or more) real anvil nodes that produce THE SAME chain, block hash for block hash, so svc
 * can fail over between them mid-stream (WebSocket subscriptions) and a client can check that
 * what it saw is the survivor's chain.
 *
 * How the chains stay equal: every node starts with `--no-mining` from the same genesis (same
 * chain id, the default dev mnemonic, a fixed genesis `--timestamp`), and the test mines them
 * itself, in lockstep: the same raw signed transactions go into every node's pool, then every
 * node mines one block with `evm_mine` and the same explicit timestamp. Everything else in an
 * anvil header is derived from those (base fee from the parent's gas use, `mixHash`/prevrandao
 * from the block number), so the hashes match; {@link LockstepAnvil.mine} checks that they do and
 * throws otherwise. `anvil_reorg` is deterministic too (its replacement blocks reuse the common
 * ancestor's timestamp), so a reorg made on every live node keeps them equal.
 *
 * Also here: {@link TICK_INIT_CODE}, a hand-assembled contract that emits `Tick(uint256)` with
 * the block number on any call, so a test has one log per block without a compiler.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { type Address, type Hex, getContractAddress, keccak256, toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from './anvil.ts';

/** Private key of anvil's first dev account (the public "test test … junk" mnemonic). */
export const DEV_PRIVATE_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';

/** topic0 of `event Tick(uint256 blockNumber)`. */
export const TICK_TOPIC: Hex = keccak256(toHex('Tick(uint256)'));

/** ABI of the Tick contract's event (viem `watchContractEvent`, `decodeEventLog`). */
export const TICK_ABI = [{ type: 'event', name: 'Tick', inputs: [{ name: 'blockNumber', type: 'uint256', indexed: false }] }] as const;

/**
 * Runtime code of the Tick contract, 43 bytes, on any call:
 * `NUMBER PUSH1 0 MSTORE` (memory[0..32] = block number),
 * `PUSH32 <TICK_TOPIC> PUSH1 32 PUSH1 0 LOG1` (log memory[0..32] with topic0 = TICK_TOPIC), `STOP`.
 */
export const TICK_RUNTIME: Hex = `0x436000527f${TICK_TOPIC.slice(2)}60206000a100`;

/**
 * Init code of the Tick contract: `PUSH1 43 DUP1 PUSH1 11 PUSH1 0 CODECOPY PUSH1 0 RETURN`
 * (copy the 43 runtime bytes that follow these 11 bytes to memory 0 and return them), then the runtime.
 */
export const TICK_INIT_CODE: Hex = `0x602b80600b6000396000f3${TICK_RUNTIME.slice(2)}`;

/** Options of {@link startLockstepAnvil}. */
export interface LockstepOptions {
  /** Upstream ids, one per node (default `['anvil-a', 'anvil-b']`). */
  ids?: string[];
  /** Chain id of every node (default 31337). */
  chainId?: number;
  /** Genesis timestamp, seconds (default 1,700,000,000); block n is mined at this plus n. */
  genesisTimestamp?: number;
}

/** A call for {@link LockstepAnvil.reorg}: a transaction to put in a replacement block. */
export interface ReorgCall {
  /** Contract called. */
  to: Address;
  /** Calldata (default empty). */
  data?: Hex;
  /** Which replacement block holds it: 0 = the first block after the common ancestor. */
  blockOffset: number;
}

/** A block header, as anvil answers `eth_getBlockByNumber(n, false)` (the fields tests read). */
export interface LockstepBlock {
  number: Hex;
  hash: Hex;
  parentHash: Hex;
  timestamp: Hex;
  transactions: Hex[];
  [key: string]: unknown;
}

/** Running lockstep nodes. */
export interface LockstepAnvil {
  /** Every node, in id order (killed ones included). */
  nodes: AnvilHandle[];
  ids: string[];
  chainId: number;
  /** Nodes not killed or stopped. */
  alive(): AnvilHandle[];
  /** The node with that id (or index). */
  node(which: string | number): AnvilHandle;
  /** Raw svc upstream entries, one per node, in order (`extra` merged in; `evm` merged, not replaced). */
  upstreams(extra?: Record<string, unknown>): Array<{ id: string; endpoint: string; evm: { chainId: number; [k: string]: unknown }; [k: string]: unknown }>;
  /** Address of the dev account that signs every transaction. */
  readonly from: Address;
  /**
   * Signs a call from the dev account with the next nonce (EIP-1559, 100 gwei cap, gas 200,000).
   * @returns the raw signed transaction, for {@link mine}
   */
  signCall(to: Address | null, data?: Hex): Promise<Hex>;
  /**
   * Mines one block on every live node at once (`evm_mine` with the next timestamp), after
   * putting `txs` (raw signed transactions) in every live node's pool.
   * @returns the new block (the same on every node)
   * @throws Error when a live node fails, or the nodes' blocks differ (hashes named)
   */
  mine(txs?: Hex[]): Promise<LockstepBlock>;
  /**
   * Deploys a contract (one block) and returns its address.
   * @param initCode creation code, e.g. {@link TICK_INIT_CODE}
   */
  deploy(initCode: Hex): Promise<Address>;
  /**
   * Mines a block every `intervalMs` until {@link stopMining}; `txsFor(n)` (optional) gives the
   * raw transactions of block `n`. A failure stops the loop and is thrown by {@link stopMining}.
   * @param onBlock called with each mined block
   */
  startMining(intervalMs: number, opts?: { txsFor?: (n: number) => Promise<Hex[]> | Hex[]; onBlock?: (b: LockstepBlock) => void }): void;
  /** Stops the loop after the block in progress; rethrows its failure if it had one. */
  stopMining(): Promise<void>;
  /**
   * SIGKILLs one node's anvil process (no clean shutdown: connections reset mid-stream); the
   * others keep mining. Waits for the process to be gone.
   */
  kill(which: string | number): Promise<void>;
  /**
   * `anvil_reorg` on every live node: drops the last `depth` blocks and mines `depth` new ones
   * holding `calls` (signed here with nonces from the common ancestor's state).
   * @returns the replacement blocks, oldest first
   * @throws Error when the live nodes' new blocks differ
   */
  reorg(depth: number, calls?: ReorgCall[]): Promise<LockstepBlock[]>;
  /** The block at height `n` of a live node (the first by default). */
  block(n: number | 'latest', which?: string | number): Promise<LockstepBlock>;
  /** Latest block number of the first live node. */
  head(): Promise<number>;
  /** Stops the mining loop and every node. Idempotent. */
  stop(): Promise<void>;
}

const hex = (n: number | bigint): Hex => `0x${n.toString(16)}`;

/**
 * The pid of the native anvil binary serving `port` (the `.bin/anvil` launcher is a node
 * wrapper whose child is the real server: SIGKILL must reach the child, or it would be orphaned).
 * Linux (/proc) only; undefined when not found.
 */
function nativeAnvilPid(port: number): number | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    const exe = argv[0] ?? '';
    if (!/(^|\/)anvil$/.test(exe)) continue;
    const i = argv.indexOf('--port');
    if (i >= 0 && argv[i + 1] === String(port)) return Number(e);
  }
  return undefined;
}

/**
 * Starts the nodes (concurrently) with `--no-mining` and a fixed genesis timestamp and checks
 * that their genesis blocks are equal.
 * @throws Error when a node does not start (the others are stopped) or the genesis hashes differ
 */
export async function startLockstepAnvil(opts: LockstepOptions = {}): Promise<LockstepAnvil> {
  const ids = opts.ids ?? ['anvil-a', 'anvil-b'];
  const chainId = opts.chainId ?? 31337;
  const genesis = opts.genesisTimestamp ?? 1_700_000_000;
  const args = ['--no-mining', '--timestamp', String(genesis)];
  const started = await Promise.allSettled(ids.map(() => startAnvil({ chainId, args })));
  const nodes = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
  }

  const dead = new Set<AnvilHandle>();
  const account = privateKeyToAccount(DEV_PRIVATE_KEY);
  let nonce = 0;
  let timestamp = genesis;
  let loop: { stop: boolean; done: Promise<void>; error?: unknown } | undefined;

  const node = (which: string | number): AnvilHandle => {
    const n = nodes[typeof which === 'number' ? which : ids.indexOf(which)];
    if (!n) throw new Error(`no anvil node ${String(which)} (${ids.join(', ')})`);
    return n;
  };
  const alive = () => nodes.filter((n) => !dead.has(n));
  const first = () => {
    const n = alive()[0];
    if (!n) throw new Error('every lockstep node is dead');
    return n;
  };
  const block = async (n: number | 'latest', which?: string | number): Promise<LockstepBlock> =>
    (await (which === undefined ? first() : node(which)).rpc('eth_getBlockByNumber', [n === 'latest' ? n : hex(n), false])) as LockstepBlock;

  /** The block at `n` on every live node; throws unless they are all the same block. */
  const sameBlock = async (n: number): Promise<LockstepBlock> => {
    const live = alive();
    const got = await Promise.all(live.map((x) => x.rpc('eth_getBlockByNumber', [hex(n), false]) as Promise<LockstepBlock | null>));
    const hashes = got.map((b) => b?.hash ?? 'none');
    if (new Set(hashes).size !== 1 || !got[0]) {
      throw new Error(`lockstep anvil: block ${n} differs: ${live.map((x, i) => `${ids[nodes.indexOf(x)]}=${hashes[i]}`).join(', ')}`);
    }
    return got[0];
  };
  await sameBlock(0);

  const signCall = (to: Address | null, data: Hex = '0x', withNonce = nonce++): Promise<Hex> =>
    account.signTransaction({
      chainId,
      type: 'eip1559',
      nonce: withNonce,
      to: to ?? undefined,
      data,
      gas: 200_000n,
      maxFeePerGas: 100_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
    });

  const mine = async (txs: Hex[] = []): Promise<LockstepBlock> => {
    const live = alive();
    if (live.length === 0) throw new Error('every lockstep node is dead');
    // A node killed while this block is mined (kill() during startMining) is left out, not an error.
    const each = (method: string, params: unknown[]) =>
      Promise.all(
        live.map((x) =>
          x.rpc(method, params).catch((e: unknown) => {
            if (!dead.has(x)) throw e;
          }),
        ),
      );
    for (const raw of txs) await each('eth_sendRawTransaction', [raw]);
    timestamp += 1;
    await each('evm_mine', [timestamp]);
    const number = Number.parseInt((await first().rpc('eth_blockNumber')) as string, 16);
    const b = await sameBlock(number);
    if (b.transactions.length !== txs.length)
      throw new Error(`lockstep anvil: block ${number} holds ${b.transactions.length} transactions, ${txs.length} sent`);
    return b;
  };

  const stopMining = async () => {
    const l = loop;
    if (!l) return;
    l.stop = true;
    await l.done;
    loop = undefined;
    if (l.error !== undefined) throw l.error;
  };

  return {
    nodes,
    ids,
    chainId,
    alive,
    node,
    from: account.address,
    upstreams: (extra = {}) =>
      nodes.map((n, i) => {
        const { evm, ...rest } = extra as { evm?: Record<string, unknown> };
        return { id: ids[i] as string, endpoint: n.url, ...rest, evm: { chainId, ...(evm ?? {}) } };
      }),
    signCall: (to, data) => signCall(to, data),
    mine,
    async deploy(initCode) {
      const at = nonce;
      await mine([await signCall(null, initCode)]);
      const address = getContractAddress({ from: account.address, nonce: BigInt(at) });
      const code = (await first().rpc('eth_getCode', [address, 'latest'])) as Hex;
      if (code === '0x') throw new Error(`lockstep anvil: no code at ${address} after deploying`);
      return address;
    },
    startMining(intervalMs, o = {}) {
      if (loop) throw new Error('lockstep anvil: already mining');
      const l: { stop: boolean; done: Promise<void>; error?: unknown } = { stop: false, done: Promise.resolve() };
      l.done = (async () => {
        while (!l.stop) {
          const started = Date.now();
          try {
            const next = Number.parseInt((await first().rpc('eth_blockNumber')) as string, 16) + 1;
            const b = await mine(o.txsFor ? await o.txsFor(next) : []);
            o.onBlock?.(b);
          } catch (e) {
            l.error = e;
            return;
          }
          const wait = intervalMs - (Date.now() - started);
          if (wait > 0 && !l.stop) await new Promise((r) => setTimeout(r, wait));
        }
      })();
      loop = l;
    },
    stopMining,
    async kill(which) {
      const n = node(which);
      if (dead.has(n)) return;
      // Out of the lockstep first, so a concurrent mine() no longer waits on it.
      dead.add(n);
      const pid = nativeAnvilPid(n.port);
      if (pid !== undefined) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
      // Reaps the launcher (which exits with its child) and waits for the port to be released;
      // without /proc this is a SIGTERM, the closest thing.
      await n.stop();
    },
    async reorg(depth, calls = []) {
      const live = alive();
      const head = Number.parseInt((await live[0]!.rpc('eth_blockNumber')) as string, 16);
      if (depth < 1 || depth > head) throw new Error(`lockstep anvil: reorg depth ${depth} at head ${head}`);
      // Nonces as of the common ancestor: the reorged blocks' transactions are gone.
      let n = Number.parseInt((await live[0]!.rpc('eth_getTransactionCount', [account.address, hex(head - depth)])) as string, 16);
      const pairs: Array<[Hex, number]> = [];
      for (const c of [...calls].sort((a, b) => a.blockOffset - b.blockOffset)) pairs.push([await signCall(c.to, c.data ?? '0x', n++), c.blockOffset]);
      await Promise.all(live.map((x) => x.rpc('anvil_reorg', [depth, pairs])));
      nonce = n;
      const out: LockstepBlock[] = [];
      for (let h = head - depth + 1; h <= head; h++) out.push(await sameBlock(h));
      return out;
    },
    block,
    head: async () => Number.parseInt((await first().rpc('eth_blockNumber')) as string, 16),
    async stop() {
      if (loop) {
        loop.stop = true;
        await loop.done;
        loop = undefined;
      }
      await Promise.all(alive().map((n) => n.stop()));
      for (const n of nodes) dead.add(n);
    },
  };
}

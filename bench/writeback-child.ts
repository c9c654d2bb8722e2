/**
 * Child process of bench/writeback.ts: fills the zero-config memory tier to its entry bound, then
 * measures rounds of unique write-backs through the cache plugin's own write path. Prints one JSON
 * line: the rounds. Argument: the number of rounds.
 */
import { RpcResult, type CallContext, type Network } from 'svc-proxy/plugin';
import { paramsHash } from 'svc-proxy/plugins/multiplex';
import { MemoryConnector } from '../plugins/cache/connectors/memory.ts';
import { callKey } from '../plugins/cache/keys.ts';
import { Policy } from '../plugins/cache/policy.ts';
import { defaultCacheConfig, DEFAULT_CONNECTOR_ID } from '../plugins/cache/schema.ts';
import { writeEntry, type StoreSink } from '../plugins/cache/store.ts';

const WRITES_PER_ROUND = 200_000;
const rounds = Math.max(1, Number(process.argv[2] ?? 3));
const config = defaultCacheConfig();
const memory = config.connectors[0]?.memory as { maxItems: number; maxTotalSize: number };
const tier = new MemoryConnector(DEFAULT_CONNECTOR_ID, memory);
const connectors = new Map([[DEFAULT_CONNECTOR_ID, tier]]);
const policies = config.policies.map((p) => new Policy(p));
// Counts like the plugin's metrics sink: a number per outcome.
let wrote = 0;
const sink: StoreSink = { read: () => undefined, wrote: () => void wrote++, skipped: () => undefined };
const network = { id: 'evm:1' } as Network;
const scope = 'main/evm:1';
const BLOCK = '0x1200000';

/** The i-th unique miss: an `eth_getBalance` of its own address at a finalized block, with its answer. */
function writeBack(i: number): void {
  const params = [`0x${i.toString(16).padStart(40, '0')}`, BLOCK];
  const ctx = { request: { idRaw: '1', method: 'eth_getBalance', params }, network, project: { id: 'main' } } as unknown as CallContext;
  const hash = paramsHash(params) as string;
  const key = callKey(scope, 'eth_getBalance', params, hash);
  if (!key) throw new Error('eth_getBalance at a block number must be cacheable');
  // The upstream's answer as it arrives: its text, the result spliced from it.
  const text = `{"jsonrpc":"2.0","id":${i},"result":"0x${(i * 7919).toString(16)}"}`;
  const r = new RpcResult(`0x${(i * 7919).toString(16)}`, text);
  writeEntry(ctx, key, 'finalized', { wire: r.wire(), value: () => r.result }, policies, connectors, undefined, sink, params);
}

// From 1: a zero balance (`"0x0"`) is empty and never stored.
let next = 1;
const gc = (globalThis as { gc?: () => void }).gc;
gc?.();
const heapBefore = process.memoryUsage().heapUsed;
for (; next <= memory.maxItems; next++) writeBack(next);
gc?.();
// The heap the full tier holds against what it accounted towards `maxTotalSize`.
const heapPerEntry = gc ? (process.memoryUsage().heapUsed - heapBefore) / tier.size : Number.NaN;
const accountedPerEntry = tier.totalSize / tier.size;
const out: Array<{ writes: number; cpuMicrosPerWrite: number; heapUsedMiB: number; entries: number }> = [];
for (let r = 0; r < rounds; r++) {
  const t0 = process.cpuUsage();
  for (let i = 0; i < WRITES_PER_ROUND; i++) writeBack(next++);
  const d = process.cpuUsage(t0);
  out.push({
    writes: WRITES_PER_ROUND,
    cpuMicrosPerWrite: (d.user + d.system) / WRITES_PER_ROUND,
    heapUsedMiB: process.memoryUsage().heapUsed / 2 ** 20,
    entries: tier.size,
  });
}
if (wrote !== next - 1) throw new Error(`expected ${next - 1} stored writes, the sink saw ${wrote}`);
process.stdout.write(`${JSON.stringify({ rounds: out, heapPerEntry, accountedPerEntry })}\n`);

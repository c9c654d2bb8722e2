/**
 * Micro-bench, run by hand (`npx tsx bench/keyv-memory.ts`): set + get of a 1 KiB cache entry on
 * svc's memory tier (lru-cache, read synchronously, as plugins/cache/connectors/memory.ts uses
 * it) against keyv's in-memory store (`new Keyv()`, a Map behind keyv's async API and its
 * `{value, expires}` envelope) and keyv over the same lru-cache. Prints operations per second
 * and ns per set+get pair, the median of 5 rounds of 200,000 pairs over 10,000 distinct keys.
 * The figure decides whether the memory tier may move to keyv (docs/caching.md).
 */
import Keyv from 'keyv';
import { LRUCache } from 'lru-cache';

const PAIRS = 200_000;
const KEYS = 10_000;
const ROUNDS = 5;
const VALUE = `{"jsonrpc":"2.0","id":1,"result":"0x${'ab'.repeat(500)}"}`.slice(0, 1024);
const keys = Array.from({ length: KEYS }, (_, i) => `main/evm:1:${i}#eth_getBalance:${i.toString(16).padStart(64, '0')}`);

type Case = { name: string; run(): Promise<void> | void };

const lruOpts = { max: 100_000, maxSize: 256 * 1024 * 1024, sizeCalculation: (v: string, k: string) => k.length + 96 + v.length };

function lruCase(): Case {
  const lru = new LRUCache<string, string>(lruOpts);
  return {
    name: 'lru-cache (svc memory tier, sync)',
    run() {
      for (let i = 0; i < PAIRS; i++) {
        const k = keys[i % KEYS] as string;
        lru.set(k, VALUE);
        if (lru.get(k) === undefined) throw new Error('miss');
      }
    },
  };
}

function keyvCase(name: string, kv: Keyv<string>): Case {
  return {
    name,
    async run() {
      for (let i = 0; i < PAIRS; i++) {
        const k = keys[i % KEYS] as string;
        await kv.set(k, VALUE);
        if ((await kv.get(k)) === undefined) throw new Error('miss');
      }
    },
  };
}

const cases: Case[] = [
  lruCase(),
  keyvCase('keyv memory store (Map)', new Keyv<string>()),
  keyvCase('keyv over lru-cache', new Keyv<string>({ store: new LRUCache<string, object>({ max: 100_000 }) as never })),
];

const rows: string[] = [];
for (const c of cases) {
  await c.run(); // warm-up
  const ns: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = process.hrtime.bigint();
    await c.run();
    ns.push(Number(process.hrtime.bigint() - t0) / PAIRS);
  }
  ns.sort((a, b) => a - b);
  const med = ns[Math.floor(ROUNDS / 2)] as number;
  rows.push(`| ${c.name} | ${med.toFixed(0)} | ${Math.round(1e9 / med).toLocaleString('en-US')} |`);
}
console.log(`Node ${process.version}, ${PAIRS.toLocaleString('en-US')} set+get pairs of a ${VALUE.length}-byte entry, median of ${ROUNDS} rounds\n`);
console.log('| store | ns per set+get | set+get pairs per second |\n|---|---:|---:|');
console.log(rows.join('\n'));

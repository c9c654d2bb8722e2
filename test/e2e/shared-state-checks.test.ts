/**
 * Shared state is outside input (docs/operations.md "Fleet: shared state", spec §2.8): in-process
 * replicas on one real redis-server in front of one anvil, replica A polling every 100 ms, B and
 * the late C and D once an hour (so they learn heads only through Redis). A raw PUBLISH of a head of
 * 900,000,000 (in the earlier format, or well-formed but judged implausible by the chain state)
 * changes no replica's eth_blockNumber answer; a snapshot hash holding a bogus head (the earlier
 * `<clusterKey>:heads` layout, a stale entry, an entry under another replica's name) is not
 * applied by a freshly started replica; entries older than the TTL are ignored; malformed entries
 * are dropped and counted in `svc_shared_state_dropped_total{reason}`; a replica's snapshot entry
 * holds only heads it observed itself and expires when the replica is gone, so a head only that
 * replica saw (a lie its upstream told it) reaches no replica started afterwards.
 */
import { expect } from 'chai';
import { createClient } from 'redis';
import { request } from 'undici';
import type { Network } from 'svc-proxy/plugin';
import type { NetworkChainState } from 'svc-proxy/plugins/evm-state';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { NO_CACHE, startSvc, type SvcHandle, waitFor } from '../helpers/svc.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

const KEY = 'chk';
const BOGUS = 900_000_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A metric's value (the first series matching `labels`), or undefined. */
async function metric(svc: SvcHandle, name: string, labels = ''): Promise<number | undefined> {
  const text = await (await request(svc.metricsUrl as string)).body.text();
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || !line.includes(labels)) continue;
    if (line[name.length] !== '{' && line[name.length] !== ' ') continue;
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

const droppedOf = async (svc: SvcHandle, reason: string) => (await metric(svc, 'svc_shared_state_dropped_total', `reason="${reason}"`)) ?? 0;

/** The eth_blockNumber a replica answers, as a number. */
async function blockNumber(svc: SvcHandle): Promise<number> {
  const r = await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
  expect(r.status, r.text).to.equal(200);
  return Number(BigInt(r.json.result as string));
}

/** The network `main/evm:31337` of a replica. */
function networkOf(svc: SvcHandle): Network {
  const n = svc.proxy.projects.get('main')?.networks.values().next().value;
  if (!n) throw new Error('no network');
  return n;
}

describe('e2e: shared state is checked and expires (Redis)', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let redis: RedisHandle;
  let raw: ReturnType<typeof createClient>;
  const started: SvcHandle[] = [];
  let a: SvcHandle;
  let b: SvcHandle;
  /** A's snapshot field (its replica id). */
  let aField = '';

  const config = (interval: string) => ({
    metrics: { enabled: true },
    ...NO_CACHE,
    sharedState: { redis: { uri: redis.url }, clusterKey: KEY, snapshotInterval: '500ms' },
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
        upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: 31337, statePollerInterval: interval } }],
      },
    ],
  });
  const start = async (interval: string): Promise<SvcHandle> => {
    const s = await startSvc(config(interval));
    started.push(s);
    await waitFor(async () => (await metric(s, 'svc_shared_state_connected')) === 1, 10_000);
    return s;
  };
  const head = async () => Number(BigInt(await anvil.rpc('eth_blockNumber')));
  const publish = (doc: unknown) => raw.publish(`${KEY}:state`, typeof doc === 'string' ? doc : JSON.stringify(doc));
  const bogusHead = (latest = BOGUS, finalized = 0) => ({ project: 'main', upstream: 'a', latest, finalized });

  before(async () => {
    [anvil, redis] = await Promise.all([startAnvil(), startRedis()]);
    raw = createClient({ url: redis.url });
    await raw.connect();
    await anvil.rpc('anvil_mine', ['0x5']);
    a = await start('100ms');
    b = await start('1h');
  });

  after(async () => {
    await Promise.all(started.map((s) => s.close()));
    await raw?.quit().catch(() => undefined);
    await Promise.all([anvil?.stop(), redis?.stop()]);
  });

  it('a head seen by the polling replica still reaches the others; its snapshot entry names it, is dated, and holds only its own heads', async () => {
    await anvil.rpc('anvil_mine', ['0x3']);
    const target = await head();
    // Read from /metrics, not by a call: an eth_blockNumber answer is B's own observation of the head.
    await waitFor(async () => (await metric(b, 'svc_upstream_latest_block', 'upstream="a"')) === target, 5000);
    await waitFor(async () => Object.keys(await raw.hGetAll(`${KEY}:snapshot`)).length > 0, 5000);
    await sleep(1200);
    const entries = Object.entries(await raw.hGetAll(`${KEY}:snapshot`)).map(([field, value]) => ({
      field,
      ...(JSON.parse(value) as { replica: string; at: number; heads: Array<{ latest: number }> }),
    }));
    // One entry per replica that observed a head itself (B polled once, at start: it has one
    // unless it had learned that head from A first), named and dated.
    expect(entries.length).to.be.within(1, 2);
    for (const e of entries) {
      expect(e.replica).to.equal(e.field);
      expect(Math.abs(Date.now() - e.at)).to.be.below(5000);
    }
    // Only A observed the new head; B learned it and does not claim it.
    const claims = entries.filter((e) => (e.heads[0]?.latest ?? 0) >= target);
    expect(claims).to.have.length(1);
    aField = claims[0]!.field;
    expect(await raw.pTTL(`${KEY}:snapshot`)).to.be.within(1, 3000);
  });

  it('a raw PUBLISH of a head of 900,000,000 (earlier format, stale, future-dated, malformed) changes no answer and is counted', async () => {
    const real = await head();
    const before = {
      malformed: await droppedOf(b, 'malformed'),
      stale: await droppedOf(b, 'stale'),
      out_of_range: await droppedOf(b, 'out_of_range'),
      oversized: await droppedOf(b, 'oversized'),
      unknown: await droppedOf(b, 'unknown'),
    };
    await publish({ replica: 'evil', heads: [bogusHead()] });
    await publish({ replica: 'evil', at: Date.now() - 60_000, heads: [bogusHead()] });
    await publish({ replica: 'evil', at: Date.now() + 3_600_000, heads: [bogusHead()] });
    await publish('{"replica":"evil","at":');
    await publish({
      replica: 'evil',
      at: Date.now(),
      heads: [
        { project: 'main', upstream: 'a', latest: -5, finalized: 0 },
        { project: 'main', upstream: 'a', latest: 2 ** 60, finalized: 0 },
        { project: 'main', upstream: 'ghost', latest: BOGUS, finalized: 0 },
      ],
    });
    await publish({ replica: 'evil', at: Date.now(), heads: Array(5000).fill(bogusHead()) });
    // Until the last message is counted (or, without these checks, the bogus head is served).
    await waitFor(async () => (await droppedOf(b, 'oversized')) > before.oversized || (await blockNumber(b)) !== real, 5000);
    for (const r of [a, b]) expect(await blockNumber(r)).to.equal(real);
    expect(await droppedOf(b, 'malformed')).to.equal(before.malformed + 2);
    expect(await droppedOf(b, 'stale')).to.equal(before.stale + 1);
    expect(await droppedOf(b, 'out_of_range')).to.equal(before.out_of_range + 3);
    expect(await droppedOf(b, 'unknown')).to.equal(before.unknown + 1);
  });

  it('a well-formed, fresh head the chain state judges implausible is not applied, and counted', async () => {
    const real = await head();
    // The plausibility rule (docs/evm.md) as the evm-state plugin will apply it: far beyond the head is implausible.
    const states: Array<[NetworkChainState, NetworkChainState['judgeHead']]> = [];
    for (const r of [a, b]) {
      const cs = networkChainState(r.proxy, networkOf(r));
      states.push([cs, cs.judgeHead]);
      cs.judgeHead = (n) => (n > real + 1000 ? 'implausible' : 'plausible');
    }
    try {
      const before = await droppedOf(b, 'implausible');
      await publish({ replica: 'evil', at: Date.now(), heads: [bogusHead(BOGUS, BOGUS - 64)] });
      await waitFor(async () => (await droppedOf(b, 'implausible')) === before + 2 || (await blockNumber(b)) !== real, 5000);
      for (const r of [a, b]) expect(await blockNumber(r)).to.equal(real);
      expect(await droppedOf(b, 'implausible')).to.equal(before + 2);
    } finally {
      for (const [cs, judge] of states) cs.judgeHead = judge;
    }
  });

  it('a freshly started replica applies no bogus snapshot entry: the earlier layout, a stale entry, a name mismatch, a malformed one', async () => {
    const real = await head();
    await raw.hSet(`${KEY}:heads`, 'main/a', `${BOGUS},${BOGUS}`);
    await raw.hSet(`${KEY}:snapshot`, {
      ghost: JSON.stringify({ replica: 'ghost', at: Date.now() - 60_000, heads: [bogusHead(BOGUS, BOGUS)] }),
      liar: JSON.stringify({ replica: 'someone-else', at: Date.now(), heads: [bogusHead(BOGUS, BOGUS)] }),
      junk: 'x'.repeat(100),
    });
    const c = await start('1h');
    await waitFor(async () => ((await droppedOf(c, 'stale')) >= 1 && (await droppedOf(c, 'malformed')) >= 2) || (await blockNumber(c)) !== real, 5000);
    expect(await blockNumber(c)).to.equal(real);
    // The stale entry is deleted by whoever reads it.
    await waitFor(async () => !(await raw.hExists(`${KEY}:snapshot`, 'ghost')), 5000);
    await raw.hDel(`${KEY}:snapshot`, ['liar', 'junk']);
    await raw.del(`${KEY}:heads`);
  });

  it('a head only a replica that is gone confirmed stops being applied: its entry expires, the others never re-publish it', async () => {
    const real = await head();
    // One upstream lies to replica A only, recorded as A's own view (past A's own plausibility
    // check, as a lie told at A's start-up could be): A publishes it as its own head.
    const network = networkOf(a);
    const upstream = a.proxy.projects.get('main')?.upstreams.get('a');
    (networkChainState(a.proxy, network) as unknown as { observeLatest(u: unknown, n: number): void }).observeLatest(upstream, BOGUS);
    // (A's next poll of that upstream sets its head back: a poll is the upstream's own truth.)
    await sleep(1200);
    // B judged it against its own confirmed head and did not apply it, and B serves the real head.
    expect(await metric(b, 'svc_upstream_latest_block', 'upstream="a"')).to.be.below(BOGUS);
    expect(await blockNumber(b)).to.equal(real);
    // At most A's own entry ever held it: nobody re-publishes it.
    const claims = Object.entries(await raw.hGetAll(`${KEY}:snapshot`)).filter(([f, v]) => f !== aField && v.includes(String(BOGUS)));
    expect(claims.map(([f]) => f)).to.deep.equal([]);
    // A stops (a crash writes nothing more): its entry keeps its last date, and goes past the TTL.
    await a.close();
    const t0 = Date.now();
    await waitFor(async () => !(await raw.hExists(`${KEY}:snapshot`, aField)), 10_000);
    // TTL: three snapshot intervals, at least 3 s.
    expect(Date.now() - t0).to.be.at.least(2000);
    // A replica started now learns nothing of it.
    const d = await start('1h');
    await sleep(1200);
    expect(await blockNumber(d)).to.equal(real);
  });
});

/**
 * Hostile class 2: the provenance rule of the cache (docs/caching.md: only answers obtained
 * under the network's own rules are shared). A call pinned with `X-SVC-Use-Upstream` (header or
 * query) or sent with `X-SVC-Skip-Consensus` neither writes nor reads the memory, Redis or
 * PostgreSQL tier, and never shares an execution with a plain call (multiplexing).
 *
 * The attack: node `a` (first in selection order) is made to disagree about an address's
 * balance with `anvil_setBalance` directly on the node; `b` and `c` agree, so consensus answers
 * their value. A pinned or consensus-skipping call gets `a`'s value; the attacker wants it served
 * to everyone else, or wants the shared value served to it instead of its node's.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { MAIN, TIERS, type Tier } from './config.ts';
import { hex, useDeployment, waitFor, type SvcResponse } from './harness.ts';
import { chaosClass, scale } from './summary.ts';

const MINORITY = '0xa11ce';
const MAJORITY = '0xb0b';
const SHARED = '0x5e5e';

/** The ways a client can ask for an answer outside the network's rules. */
const BYPASSES: Array<[string, (path: string) => [string, Record<string, string>]]> = [
  ['X-SVC-Use-Upstream: a', (p) => [p, { 'x-svc-use-upstream': 'a' }]],
  ['?use-upstream=a', (p) => [`${p}?use-upstream=a`, {}]],
  ['X-SVC-Skip-Consensus: true', (p) => [p, { 'x-svc-skip-consensus': 'true' }]],
];

describe('chaos [2] pinned and consensus-skipping calls: never in the shared cache', function () {
  this.timeout(120_000);
  const cls = chaosClass(2, 'pinned / skip-consensus calls vs the shared cache');
  const dep = useDeployment();
  const used: string[] = [];
  let head = 0;

  before(async () => {
    head = await dep().settled();
  });
  afterEach(async () => {
    // The nodes agree again before anything is mined (their chains must stay identical).
    for (const w of used.splice(0)) await dep().everyNode('anvil_setBalance', [w, '0x0']);
  });

  /** A fresh address that node `a` alone says holds {@link MINORITY}, `b` and `c` {@link MAJORITY}. */
  async function disputed(): Promise<string> {
    const w = `0x${randomBytes(20).toString('hex')}`;
    used.push(w);
    await dep().node('a').rpc('anvil_setBalance', [w, MINORITY]);
    await dep().node('b').rpc('anvil_setBalance', [w, MAJORITY]);
    await dep().node('c').rpc('anvil_setBalance', [w, MAJORITY]);
    return w;
  }
  const body = (w: string) => ({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [w, hex(head)] });
  const plain = (w: string, headers: Record<string, string> = {}) => dep().post(MAIN, body(w), headers);
  const bypass = (how: (typeof BYPASSES)[number][1], w: string, headers: Record<string, string> = {}) => {
    const [path, h] = how(MAIN);
    cls.attack();
    return dep().post(path, body(w), { ...h, ...headers });
  };
  const hitIn = async (tier: Tier, w: string, value: string) => {
    let r: SvcResponse | undefined;
    await waitFor(async () => (r = await plain(w, dep().onlyTier(tier))).headers['x-svc-cache'] === 'HIT', 5000);
    expect(r!.json.result, `${tier} holds the network's answer`).to.equal(value);
  };

  it('a pinned or consensus-skipping answer is never written to the memory, Redis or PostgreSQL tier', async () => {
    for (let round = 0; round < scale(1); round++) {
      const targets: Array<[Tier, string, string]> = [];
      for (const tier of TIERS) {
        for (const [name, how] of BYPASSES) {
          const w = await disputed();
          const res = await bypass(how, w);
          expect(res.json?.result, `${name}: ${res.text}`).to.equal(MINORITY);
          targets.push([tier, name, w]);
        }
      }
      // Writes follow answers asynchronously: once a plain answer given after the attacks is in
      // every tier, an attacker's write would be there too.
      const sentinel = `0x${randomBytes(20).toString('hex')}`;
      used.push(sentinel);
      await dep().everyNode('anvil_setBalance', [sentinel, SHARED]);
      expect((await plain(sentinel)).json.result).to.equal(SHARED);
      for (const tier of TIERS) await hitIn(tier, sentinel, SHARED);
      for (const [tier, name, w] of targets) {
        const res = await plain(w, dep().onlyTier(tier));
        expect(res.headers['x-svc-cache'], `${tier} after ${name}`).to.not.equal('HIT');
        expect(res.json.result, `${tier} after ${name}`).to.equal(MAJORITY);
      }
    }
  });

  it('a pinned or consensus-skipping call never reads the memory, Redis or PostgreSQL tier', async () => {
    for (let round = 0; round < scale(1); round++) {
      const w = await disputed();
      expect((await plain(w)).json.result).to.equal(MAJORITY);
      for (const tier of TIERS) await hitIn(tier, w, MAJORITY);
      for (const tier of TIERS) {
        for (const [name, how] of BYPASSES) {
          const res = await bypass(how, w, dep().onlyTier(tier));
          expect(res.headers['x-svc-cache'], `${name} reading ${tier}`).to.not.equal('HIT');
          expect(res.json.result, `${name} reading ${tier}`).to.equal(MINORITY);
        }
      }
    }
  });

  it('a pin matching no upstream is ErrUpstreamsExhausted, never the cached answer', async () => {
    const w = await disputed();
    expect((await plain(w)).json.result).to.equal(MAJORITY);
    for (const tier of TIERS) await hitIn(tier, w, MAJORITY);
    for (const pin of ['nope', 'vendor', 'z*']) {
      const res = await dep().post(MAIN, body(w), { 'x-svc-use-upstream': pin });
      cls.attack();
      expect(res.json?.error?.message ?? '', `pin ${pin}: ${res.text}`).to.match(/exhausted|no upstream/i);
      expect(res.headers['x-svc-cache'], `pin ${pin}`).to.not.equal('HIT');
    }
  });

  it('concurrent plain and pinned calls for the same params never share an execution (multiplexing)', async () => {
    for (let round = 0; round < scale(3); round++) {
      const w = await disputed();
      const n = 4;
      const calls: Array<Promise<[string, SvcResponse]>> = [];
      for (let i = 0; i < n; i++) {
        calls.push(plain(w).then((r) => ['plain', r]));
        for (const [name, how] of BYPASSES) calls.push(bypass(how, w).then((r) => [name, r]));
      }
      for (const [name, r] of await Promise.all(calls)) expect(r.json?.result, `${name}: ${r.text}`).to.equal(name === 'plain' ? MAJORITY : MINORITY);
    }
  });

  it("a pinned batch writes none of its answers; a plain batch after it gets the network's answers", async () => {
    const [w1, w2] = [await disputed(), await disputed()];
    const batch = [body(w1), { ...body(w2), id: 2 }];
    const pinned = await dep().post(MAIN, batch, { 'x-svc-use-upstream': 'a' });
    cls.attack();
    expect(pinned.json.map((x: { result: string }) => x.result)).to.deep.equal([MINORITY, MINORITY]);
    const after = await dep().post(MAIN, batch);
    expect(after.headers['x-svc-cache']).to.equal('MISS');
    expect(after.json.map((x: { result: string }) => x.result)).to.deep.equal([MAJORITY, MAJORITY]);
  });
});

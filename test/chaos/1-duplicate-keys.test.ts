/**
 * Hostile class 1: one parse, one truth (docs/access.md "Limits and security"). A request object that
 * names a member twice, at any depth, with or without `\u` escapes, is refused with -32600
 * before anything is keyed, cached or sent; large params go upstream as the client's own bytes
 * only when every number in them reads back unchanged. The attacker's goal: make svc key one
 * reading of the body and send another, so that a later plain client gets the attacker's answer.
 * Every follow-up plain call is compared with the node's own answer to the same body, in every
 * cache tier.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ECHO, MAIN, TIERS, VALUE } from './config.ts';
import { hex, useDeployment, waitFor, type SvcResponse } from './harness.ts';
import { chaosClass, scale } from './summary.ts';
import { ADDR0 } from '../e2e/fixtures.ts';

/** A finalized block (cached forever in every tier) at which the contracts already exist. */
const BLOCK = hex(50);

describe('chaos [1] duplicated keys: one parse, one truth', function () {
  this.timeout(120_000);
  const cls = chaosClass(1, 'duplicated keys');
  const dep = useDeployment();

  /** `n` bytes of fresh random calldata, hex. */
  const calldata = (n: number) => `0x${randomBytes(n).toString('hex')}`;
  const echoCall = (data: string, id: unknown = 1) =>
    `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"eth_call","params":[{"to":"${ECHO}","data":"${data}"},"${BLOCK}"]}`;

  /** The node's own answer to a body (node `a`, the first in selection order). */
  async function direct(body: string): Promise<unknown> {
    const res = await fetch(dep().node('a').url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const json = (await res.json()) as { result?: unknown; error?: unknown };
    return json.result ?? json.error;
  }

  function refused(res: SvcResponse, member: string): void {
    expect(res.status, res.text.slice(0, 300)).to.equal(400);
    expect(res.json?.error?.code, res.text.slice(0, 300)).to.equal(-32600);
    expect(res.json.error.message).to.contain(`"${member}"`);
    expect(res.headers['x-svc-upstream-attempts'] ?? '0').to.equal('0');
  }

  /**
   * A plain client sending `body` gets the node's answer to `body`: at once (and, when `fresh`,
   * not as a hit: nobody sent this body before, so a hit is an attacker's entry), and again from
   * each cache tier once it is written there.
   */
  async function plainGetsItsOwn(body: string, fresh = true): Promise<void> {
    const own = await direct(body);
    const first = await dep().post(MAIN, body);
    cls.attack();
    expect(first.json?.result, `first plain call (X-SVC-Cache ${first.headers['x-svc-cache']})`).to.deep.equal(own);
    if (fresh) expect(first.headers['x-svc-cache'], 'nothing was cached for this body before').to.not.equal('HIT');
    for (const tier of TIERS) {
      let got: SvcResponse | undefined;
      await waitFor(async () => (got = await dep().post(MAIN, body, dep().onlyTier(tier))).headers['x-svc-cache'] === 'HIT', 5000);
      expect(got!.json.result, `${tier}`).to.deep.equal(own);
    }
  }

  it("a duplicated params member never decides another client's answer (large raw params and small ones, A then B)", async () => {
    for (let i = 0; i < scale(2); i++) {
      for (const size of [40 * 1024, 32]) {
        const [a, b] = [calldata(size), calldata(size)];
        const params = (d: string) => `[{"to":"${ECHO}","data":"${d}"},"${BLOCK}"]`;
        refused(await dep().post(MAIN, `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":${params(a)},"params":${params(b)}}`), 'params');
        cls.attack();
        await plainGetsItsOwn(echoCall(b));
        await plainGetsItsOwn(echoCall(a));
      }
    }
  });

  it('a duplicated method member is refused and never reaches a node (eth_chainId / anvil_mine, both orders)', async () => {
    const heads = await dep().everyNode('eth_blockNumber');
    for (let i = 0; i < scale(3); i++) {
      refused(await dep().post(MAIN, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"anvil_mine","params":["0x5"]}`), 'method');
      refused(await dep().post(MAIN, `{"jsonrpc":"2.0","id":1,"method":"anvil_mine","params":["0x5"],"method":"eth_chainId"}`), 'method');
      cls.attack(2);
    }
    expect(await dep().everyNode('eth_blockNumber')).to.deep.equal(heads);
  });

  it('a duplicated id member is refused (id null), so no answer is routed by the other id', async () => {
    for (let i = 0; i < scale(3); i++) {
      const res = await dep().post(MAIN, `{"jsonrpc":"2.0","id":${i},"id":"victim-${i}","method":"eth_chainId"}`);
      cls.attack();
      refused(res, 'id');
      expect(res.json.id).to.equal(null);
    }
  });

  it("a member duplicated inside params (nested, escaped, four levels deep) never decides another client's answer", async () => {
    for (let i = 0; i < scale(2); i++) {
      const [a, b] = [calldata(40 * 1024), calldata(40 * 1024)];
      // "data" twice in the call object; the second spelled with an escape.
      refused(
        await dep().post(MAIN, `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${ECHO}","data":"${a}","d\\u0061ta":"${b}"},"${BLOCK}"]}`),
        'data',
      );
      // "params" twice, the second written entirely in escapes.
      refused(
        await dep().post(
          MAIN,
          `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${ECHO}","data":"${a}"},"${BLOCK}"],"\\u0070\\u0061\\u0072\\u0061\\u006d\\u0073":[{"to":"${ECHO}","data":"${b}"},"${BLOCK}"]}`,
        ),
        'params',
      );
      // A state override whose balance is given twice, four levels down.
      refused(
        await dep().post(
          MAIN,
          `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${ECHO}","data":"${a}"},"${BLOCK}",{"${ECHO}":{"balance":"0x1","balance":"0x2"}}]}`,
        ),
        'balance',
      );
      cls.attack(3);
      await plainGetsItsOwn(echoCall(a));
      await plainGetsItsOwn(echoCall(b));
    }
  });

  it('in a batch only the element with a duplicated member is refused; its neighbours get their own answers', async () => {
    for (let i = 0; i < scale(2); i++) {
      const [a, b, c] = [calldata(64), calldata(64), calldata(64)];
      const body = `[${echoCall(a, 1)},{"jsonrpc":"2.0","id":2,"method":"eth_call","params":[{"to":"${ECHO}","data":"${b}"},"${BLOCK}"],"params":[{"to":"${ECHO}","data":"${c}"},"${BLOCK}"]},${echoCall(c, 3)}]`;
      const res = await dep().post(MAIN, body);
      cls.attack();
      expect(res.status).to.equal(200);
      const [x, y, z] = res.json as Array<{ id: number; result?: string; error?: { code: number; message: string } }>;
      expect(x).to.include({ id: 1, result: a });
      expect(y!.id).to.equal(2);
      expect(y!.error?.code).to.equal(-32600);
      expect(y!.error?.message).to.contain('"params"');
      expect(z).to.include({ id: 3, result: c });
      await plainGetsItsOwn(echoCall(b));
    }
  });

  it("a number beyond 2^53 in large raw params never puts one client's answer under another client's key", async () => {
    // VALUE returns msg.value: a node reading 2^53+1 answers differently from one reading 2^53.
    for (let i = 0; i < scale(2); i++) {
      const pad = calldata(40 * 1024);
      const body = (value: string) =>
        `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"from":"${ADDR0}","to":"${VALUE}","value":${value},"data":"${pad}"},"${BLOCK}"]}`;
      const attacker = await dep().post(MAIN, body('9007199254740993'));
      cls.attack();
      expect(attacker.json?.result, attacker.text.slice(0, 300)).to.match(/^0x[0-9a-f]{64}$/);
      // The victim's request is another number: what it gets must be the node's answer to it
      // (a hit is fine when the attacker's call was sent, and so keyed, as that same number).
      await plainGetsItsOwn(body('9007199254740992'), false);
      expect(BigInt((await direct(body('9007199254740992'))) as string)).to.equal(2n ** 53n);
    }
  });
});

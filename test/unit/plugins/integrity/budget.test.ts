/**
 * eRPC's `integrity.budget` in svc: the authoritative level's fetch budget (token bucket per
 * second, all-or-nothing per vote; fetches in flight capped, a freed slot handed to the first
 * waiter), its schema and its config path.
 */
import { expect } from 'chai';
import { budgetOf, compileIntegrity, FetchBudget } from '../../../../plugins/integrity/index.ts';

describe('integrity: budget', () => {
  it('maxPerSecond: a vote takes all its fetches or none, and the bucket refills at the rate', () => {
    let t = 0;
    const b = new FetchBudget(10, 0, () => t);
    expect(b.reserve(8)).to.equal(true);
    expect(b.reserve(3)).to.equal(false); // 2 left: nothing taken
    expect(b.reserve(2)).to.equal(true);
    expect(b.reserve(1)).to.equal(false);
    t += 500; // half a second: 5 more
    expect(b.reserve(5)).to.equal(true);
    t += 60_000; // never above capacity
    expect(b.reserve(11)).to.equal(false);
    expect(b.reserve(10)).to.equal(true);
  });

  it('maxConcurrent: at most that many fetches run; a waiter gets the freed slot, or fails after its wait', async () => {
    const b = new FetchBudget(0, 2);
    const gates: Array<() => void> = [];
    let peak = 0;
    const fetch = () =>
      b.run(5_000, async () => {
        peak = Math.max(peak, b.running);
        await new Promise<void>((r) => gates.push(r));
        return 'ok';
      });
    const runs = [fetch(), fetch(), fetch()];
    await new Promise((r) => setImmediate(r));
    expect(gates).to.have.length(2);
    expect(b.running).to.equal(2);
    gates.shift()?.();
    await new Promise((r) => setImmediate(r));
    expect(gates).to.have.length(2); // the third took the freed slot
    for (const g of gates.splice(0)) g();
    expect(await Promise.all(runs)).to.deep.equal(['ok', 'ok', 'ok']);
    expect(peak).to.equal(2);
    expect(b.running).to.equal(0);

    const busy = new FetchBudget(0, 1);
    let release!: () => void;
    const held = busy.run(5_000, () => new Promise<void>((r) => (release = r)));
    await new Promise((r) => setImmediate(r));
    let ran = false;
    await busy
      .run(1, async () => {
        ran = true;
      })
      .then(
        () => expect.fail('expected no slot'),
        (e: Error) => expect(e.message).to.match(/no fetch slot/),
      );
    expect(ran).to.equal(false);
    release();
    await held;
    expect(busy.running).to.equal(0);
  });

  it('0 or unset caps nothing; the budget is compiled per network from integrity.budget', () => {
    expect(budgetOf(undefined)).to.equal(undefined);
    expect(budgetOf({ maxPerSecond: 0, maxConcurrent: 0 })).to.equal(undefined);
    const b = budgetOf({ maxPerSecond: 50, maxConcurrent: 8 })!;
    expect([b.maxPerSecond, b.maxConcurrent]).to.deep.equal([50, 8]);
    expect(compileIntegrity({ budget: { maxConcurrent: 3 } }).budget?.maxConcurrent).to.equal(3);
    expect(compileIntegrity({}).budget).to.equal(undefined);
  });
});

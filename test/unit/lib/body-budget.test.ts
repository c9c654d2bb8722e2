/**
 * The global bound on response bytes in flight (spec §8): `readBodyCapped` with a `ByteBudget`
 * takes a declared length up front and streamed bytes chunk by chunk, refuses a body that would
 * pass the limit, and gives back what a failed body took.
 */
import { expect } from 'chai';
import { PassThrough } from 'node:stream';
import { ByteBudget, readBodyCapped, type BodyFailure } from '../../../lib/body.ts';

const fail = (f: BodyFailure) => Object.assign(new Error(f.kind), { failure: f });

describe('readBodyCapped with a ByteBudget', () => {
  it('holds a declared body until the caller releases it; a second one past the limit is refused', async () => {
    const budget = new ByteBudget(100);
    const a = new PassThrough();
    const pa = readBodyCapped(a, { declared: '60', limit: 1000, onTooLarge: 'destroy', fail, budget });
    expect(budget.inFlight).to.equal(60);
    const b = new PassThrough();
    const err = await readBodyCapped(b, { declared: '60', limit: 1000, onTooLarge: 'destroy', fail, budget }).catch((e: Error) => e);
    expect((err as Error & { failure: BodyFailure }).failure.kind).to.equal('over-budget');
    expect(b.destroyed).to.equal(true);
    a.end(Buffer.alloc(60, 0x31));
    const buf = await pa;
    expect(buf.length).to.equal(60);
    expect(budget.inFlight).to.equal(60);
    budget.release(buf.length);
    expect(budget.inFlight).to.equal(0);
  });

  it('counts an undeclared body chunk by chunk and gives back what it took when refused', async () => {
    const budget = new ByteBudget(100);
    budget.take(50);
    const s = new PassThrough();
    const p = readBodyCapped(s, { declared: undefined, limit: 1000, onTooLarge: 'destroy', fail, budget }).catch((e: Error) => e);
    s.write(Buffer.alloc(30));
    s.write(Buffer.alloc(30));
    const err = (await p) as Error & { failure: BodyFailure };
    expect(err.failure).to.deep.equal({ kind: 'over-budget', inFlight: 80, limit: 100 });
    expect(budget.inFlight).to.equal(50);
  });

  it('gives back a short or failed body', async () => {
    const budget = new ByteBudget(100);
    const s = new PassThrough();
    const p = readBodyCapped(s, { declared: '40', limit: 1000, onTooLarge: 'destroy', fail, budget }).catch((e: Error) => e);
    s.end(Buffer.alloc(10));
    expect(((await p) as Error & { failure: BodyFailure }).failure.kind).to.equal('short');
    expect(budget.inFlight).to.equal(0);
  });
});

/**
 * eRPC's selection policy as JavaScript source (YAML `selectionPolicy.evalFunc`), run by svc in a
 * node:vm context: eRPC's chain helpers with eRPC's semantics, only its arguments in reach (no
 * require, process, timers, console, no code from strings), bounded by evalTimeout, and a throwing
 * or slow policy failing one evaluation with a PolicyError.
 */
import { expect } from 'chai';
import { evaluatePolicy, PolicyError, type PolicyResult, type PolicyUpstreamInput } from '../../../plugins/selection/index.ts';
import { compileSourcePolicy, MAX_POLICY_SOURCE, PolicySourceError } from '../../../plugins/selection/sandbox.ts';

/** A deadline far beyond what a policy that ends costs, so a loaded machine cannot turn an answer into a timeout. */
const GENEROUS_MS = 10_000;

function run(source: string, inputs: PolicyUpstreamInput[], evalTimeoutMs = GENEROUS_MS): PolicyResult {
  const r = evaluatePolicy(inputs, { evalFunc: compileSourcePolicy(source), evalTimeoutMs, network: 'evm:1' });
  if (r instanceof Promise) throw new Error('a source policy must be synchronous');
  return r;
}

function failure(source: string, inputs: PolicyUpstreamInput[] = [{ id: 'a' }], evalTimeoutMs = GENEROUS_MS): PolicyError {
  try {
    run(source, inputs, evalTimeoutMs);
  } catch (e) {
    expect(e).to.be.instanceOf(PolicyError);
    return e as PolicyError;
  }
  throw new Error('the policy did not fail');
}

const healthy = (id: string, extra: Partial<PolicyUpstreamInput> = {}): PolicyUpstreamInput => ({ id, metrics: { requests: 20 }, ...extra });

describe('selection: evalFunc as JavaScript source (node:vm)', () => {
  it("runs eRPC's documented chain: removeCordoned, excludeIf(all(samplesAbove, errorRateAbove)), preferTag with fallback, sortByScore(PREFER_FASTEST)", () => {
    const source = `(upstreams, ctx) =>
      upstreams
        .removeCordoned()
        .excludeIf(all(samplesAbove(10), errorRateAbove(0.7)))
        .whenEmpty(() => upstreams)
        .preferTag('!tier:fallback', { minHealthy: 1, fallback: 'tier:fallback' })
        .sortByScore(PREFER_FASTEST)`;
    const r = run(source, [
      healthy('slow', { metrics: { requests: 20, p70: 0.4 } }),
      healthy('broken', { metrics: { requests: 20, errorRate: 0.9 } }),
      healthy('fast', { metrics: { requests: 20, p70: 0.01 } }),
      healthy('spare', { tags: ['tier:fallback'] }),
      healthy('held', { cordoned: true }),
    ]);
    expect(r.order).to.deep.equal(['fast', 'slow']);
    expect(r.cordonsRemoved).to.equal(true);
    expect(r.excluded).to.have.keys(['broken', 'spare', 'held']);
    expect(r.excluded.held).to.equal('cordoned');
  });

  it('falls back to tier:fallback when nothing else survives; the context is the network scope (method *, finality unknown)', () => {
    const source = `(ups, ctx) => ctx.method === '*' && ctx.finality === 'unknown' && ctx.network === 'evm:1' && methodMatches('*') && !isFinalityRequest()
      ? ups.excludeIf(errorRateAbove(0.5)).preferTag('!tier:fallback', { fallback: 'tier:fallback' })
      : []`;
    const r = run(source, [healthy('main', { metrics: { requests: 20, errorRate: 0.9 } }), healthy('spare', { tags: ['tier:fallback'] })]);
    expect(r.order).to.deep.equal(['spare']);
  });

  it("sortByScore merges each upstream's scoreMultipliers (overall lifts the score, eRPC's overall / (1 + penalty))", () => {
    const source = '(ups) => ups.sortByScore()';
    const inputs = [healthy('a', { metrics: { requests: 20, p70: 0.1 } }), healthy('b', { metrics: { requests: 20, p70: 0.2 } })];
    expect(run(source, inputs).order).to.deep.equal(['a', 'b']);
    inputs[1] = { ...inputs[1]!, scoreMultipliers: { overall: 2 } }; // b: 2/(1+3) = 0.5 > a: 1/(1+1.5) = 0.4
    expect(run(source, inputs).order).to.deep.equal(['b', 'a']);
    expect(run('(ups) => ups.sortByScore(PREFER_FASTEST, { multipliers: "off" })', inputs).order).to.deep.equal(['a', 'b']);
  });

  it('sees eRPC metric names and svc names; ids, unknown ids and duplicates are handled as for a TypeScript policy', () => {
    const source = `(ups) => [
      ...ups.filter((u) => u.metrics.requestsTotal === 20 && u.metrics.p70ResponseSeconds === 0.3 && u.metrics.latencyP(0.7) === 300 && u.metrics.p70 === 0.3 && u.type === 'evm' && u.hasTag('x:*')),
      'nope', 'b', 'b',
    ]`;
    const r = run(source, [healthy('a', { metrics: { requests: 20, p70: 0.3 }, tags: ['x:1'] }), healthy('b')]);
    expect(r.order).to.deep.equal(['a', 'b']);
  });

  it('reaches nothing but its arguments: no require, process, timers, console, Buffer; no code from strings', () => {
    const e = failure('() => { throw new Error([typeof require, typeof process, typeof setTimeout, typeof console, typeof Buffer, typeof fetch].join(",")) }');
    expect(e.kind).to.equal('error');
    expect(e.message).to.include('undefined,undefined,undefined,undefined,undefined,undefined');
    expect(failure('() => eval("[]")').message).to.match(/EvalError|[Cc]ode generation/);
    expect(failure('(ups) => ups.constructor.constructor("return process")()').message).to.match(/EvalError|[Cc]ode generation/);
  });

  it('a fresh context each evaluation: what one run leaves in globalThis, the next does not see', () => {
    const source = '(ups) => { const seen = globalThis.mark === 1; globalThis.mark = 1; return seen ? [] : ups; }';
    expect(run(source, [healthy('a')]).order).to.deep.equal(['a']);
    expect(run(source, [healthy('a')]).order).to.deep.equal(['a']);
  });

  it('a loop is stopped at evalTimeout (kind timeout), also inside a getter of what it returns', () => {
    expect(failure('() => { for (;;) {} }', [{ id: 'a' }], 30).kind).to.equal('timeout');
    expect(failure('() => [{ get id() { for (;;) {} } }]', [{ id: 'a' }], 30).kind).to.equal('timeout');
    expect(failure('() => { throw { toString() { for (;;) {} } } }', [{ id: 'a' }], 30).kind).to.equal('timeout');
    expect(failure('() => { Promise.resolve().then(() => { for (;;) {} }); return []; }', [{ id: 'a' }], 30).kind).to.equal('timeout');
  });

  it('throwing, returning a promise or no array fails the evaluation with a message', () => {
    expect(failure('() => { throw new TypeError("nope") }').message).to.match(/TypeError: nope/);
    expect(failure('async (ups) => ups').message).to.match(/returned a promise/);
    expect(failure('() => 42').message).to.match(/returned number, not an array/);
    expect(failure('42').message).to.match(/evalFunc is not a function/);
  });

  it('refuses source that is not JavaScript, or longer than 64 KiB', () => {
    expect(() => compileSourcePolicy('(ups) => ups.')).to.throw(PolicySourceError, /not valid JavaScript/);
    expect(() => compileSourcePolicy(`(u) => u // ${'x'.repeat(MAX_POLICY_SOURCE)}`)).to.throw(PolicySourceError, /more than 65536/);
    // A trailing comment does not swallow the wrapper.
    expect(run('(ups) => ups // the end', [{ id: 'a' }]).order).to.deep.equal(['a']);
  });
});

/**
 * The deferred metrics of the metrics plugin (lib/deferred-metrics.ts): counted as
 * plain numbers, exposed exactly as prom-client's own Counter and Histogram would expose the
 * same observations.
 */
import { expect } from 'chai';
import { Counter, Histogram, Registry } from 'prom-client';
import { DeferredCounter, DeferredHistogram } from '../../../lib/deferred-metrics.ts';

const BUCKETS = [0.01, 0.1, 1];
const OBSERVED = [0.005, 0.05, 0.05, 0.5, 3, 0.1];

describe('metrics: deferred counter and histogram', () => {
  it('a DeferredHistogram exposes the same text as a prom-client Histogram fed the same values', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const h = new DeferredHistogram(ours, { name: 'x_seconds', help: 'h', labelNames: ['a', 'b'], buckets: BUCKETS });
    const ref = new Histogram({ name: 'x_seconds', help: 'h', labelNames: ['a', 'b'], buckets: BUCKETS, registers: [theirs] });
    for (const v of OBSERVED) {
      h.observe(h.child(['p', v > 1 ? 'slow' : 'fast']), v);
      ref.observe({ a: 'p', b: v > 1 ? 'slow' : 'fast' }, v);
    }
    const lines = (t: string) => t.split('\n').filter(Boolean).sort();
    expect(lines(await ours.metrics())).to.deep.equal(lines(await theirs.metrics()));
    ours.resetMetrics();
    expect(await ours.metrics()).to.include('x_seconds_count{a="p",b="fast"} 0');
  });

  it('a DeferredCounter flushes its counts on every registry read', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const c = new DeferredCounter(ours, { name: 'y_total', help: 'c', labelNames: ['m'] });
    const ref = new Counter({ name: 'y_total', help: 'c', labelNames: ['m'], registers: [theirs] });
    for (const m of ['a', 'b', 'a']) {
      c.inc([m]);
      ref.inc({ m });
    }
    expect(await ours.metrics()).to.equal(await theirs.metrics());
    c.inc(['a']);
    expect(await ours.metrics()).to.include('y_total{m="a"} 3');
  });
});

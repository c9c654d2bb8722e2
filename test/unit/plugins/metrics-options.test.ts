/**
 * The metrics plugin's eRPC keys under `metrics` (plugins/metrics/options.ts,
 * histogram-filter.ts): `errorLabelMode`, `histogramBuckets`, `histogramDropLabels`,
 * `histogramLabelOverrides` — parsing and refusals as eRPC validates them, the verbose error label
 * as eRPC cleans messages, and the histogram label filter on the exposition text.
 */
import { expect } from 'chai';
import { Counter, Histogram, Registry } from 'prom-client';
import { loadConfigObject } from '../../../config/load.ts';
import { buildConfigSchema, fragmentCollisions } from '../../../config/schema.ts';
import { DeferredHistogram } from '../../../lib/deferred-metrics.ts';
import {
  DEFAULT_LATENCY_BUCKETS,
  droppedLabels,
  FilteredRegistry,
  mergeSamples,
  metricsOptionsOf,
  metricsPlugin,
  parseBuckets,
  verboseErrorLabel,
} from '../../../plugins/metrics/index.ts';
import { VerboseErrorLabels } from '../../../plugins/metrics/options.ts';
import { unknownFilterNames } from '../../../plugins/metrics/histogram-filter.ts';

const fragment = () => metricsPlugin().schema ?? {};
const load = (metrics: Record<string, unknown>) => loadConfigObject({ metrics }, { fragments: [fragment()] }).config;

describe('metrics options (eRPC keys under metrics)', () => {
  describe('histogramBuckets', () => {
    it("eRPC's comma-separated string: parsed, sorted, duplicates dropped", () => {
      expect(parseBuckets('5, 0.05,30,0.5,5')).to.deep.equal([0.05, 0.5, 5, 30]);
      expect(parseBuckets('1e-3,2.5')).to.deep.equal([0.001, 2.5]);
    });
    it('a list of numbers too', () => {
      expect(parseBuckets([1, 0.1])).to.deep.equal([0.1, 1]);
    });
    it("unset or empty: svc's defaults", () => {
      expect(parseBuckets(undefined)).to.equal(DEFAULT_LATENCY_BUCKETS);
      expect(parseBuckets('  ')).to.equal(DEFAULT_LATENCY_BUCKETS);
    });
    it('a part that is not a number is refused at load, naming the path', () => {
      expect(() => load({ histogramBuckets: '0.05,abc,5' })).to.throw(/metrics\.histogramBuckets|metrics\/histogramBuckets/);
      expect(() => parseBuckets('0.05,,5')).to.throw(/not a number/);
    });
    it('the resolved options carry them', () => {
      expect(metricsOptionsOf(load({ histogramBuckets: '0.05,0.5,5,30' }).metrics.settings).buckets).to.deep.equal([0.05, 0.5, 5, 30]);
    });
  });

  describe('errorLabelMode', () => {
    it('defaults to compact; verbose is accepted', () => {
      expect(metricsOptionsOf(load({}).metrics.settings).errorLabelMode).to.equal('compact');
      expect(metricsOptionsOf(load({ errorLabelMode: 'verbose' }).metrics.settings).errorLabelMode).to.equal('verbose');
    });
    it('anything else is refused, as eRPC refuses it', () => {
      expect(() => load({ errorLabelMode: 'loud' })).to.throw(/errorLabelMode/);
    });
    it('verbose: the name and the message cleaned as eRPC cleans it (hashes, IPs, numbers, long words masked; one line; no punctuation)', () => {
      expect(verboseErrorLabel('ErrEndpointServerSideException', 'header not found for block 0x1a2b3c at 10.0.0.12\nretry in 1500ms')).to.equal(
        'ErrEndpointServerSideException header not found for block 0xREDACTED at X.X.X.X retry in XXms',
      );
      expect(verboseErrorLabel('ErrEndpointExecutionException', 'call failed: execution reverted: Ownable: caller is not the owner')).to.equal(
        'ErrEndpointExecutionException execution reverted',
      );
      expect(verboseErrorLabel('E', 'x'.repeat(40))).to.equal('E XX');
      expect(verboseErrorLabel('E', 'a '.repeat(400)).length).to.be.at.most(256);
    });
    it('verbose labels are bounded: later new ones become `<name> other`', () => {
      const labels = new VerboseErrorLabels(2);
      expect(labels.value('ErrA', 'one')).to.equal('ErrA one');
      expect(labels.value('ErrA', 'two')).to.equal('ErrA two');
      expect(labels.value('ErrA', 'three')).to.equal('ErrA other');
      expect(labels.value('ErrA', 'one')).to.equal('ErrA one');
    });
  });

  describe('histogramDropLabels and histogramLabelOverrides', () => {
    it('drop labels from every histogram; an override keeps them on the histogram it names (without svc_, or with erpc_ as eRPC writes it)', () => {
      const opts = metricsOptionsOf(
        load({
          histogramDropLabels: ['upstream', 'finality', 'le'],
          histogramLabelOverrides: { network_request_duration_seconds: ['finality'], erpc_upstream_request_duration_seconds: ['upstream'] },
        }).metrics.settings,
      );
      expect([...droppedLabels(opts, 'svc_cordon_duration_seconds', ['project', 'upstream', 'le'])]).to.deep.equal(['upstream']);
      expect([...droppedLabels(opts, 'svc_network_request_duration_seconds', ['network', 'finality'])]).to.deep.equal([]);
      expect([...droppedLabels(opts, 'svc_upstream_request_duration_seconds', ['upstream', 'finality'])]).to.deep.equal(['finality']);
    });
    it('refuses a non-list drop list and a non-map override, naming the key', () => {
      expect(() => load({ histogramDropLabels: 'user' })).to.throw(/histogramDropLabels/);
      expect(() => load({ histogramLabelOverrides: { x: 'user' } })).to.throw(/histogramLabelOverrides/);
    });
    it('merging: series equal but for dropped labels are summed, bucket by bucket', () => {
      const merged = mergeSamples(
        [
          { labels: { le: 1, upstream: 'a', network: 'evm:1' }, value: 2, metricName: 'h_bucket' },
          { labels: { le: 1, upstream: 'b', network: 'evm:1' }, value: 3, metricName: 'h_bucket' },
          { labels: { upstream: 'a', network: 'evm:1' }, value: 0.5, metricName: 'h_sum' },
          { labels: { upstream: 'b', network: 'evm:1' }, value: 0.25, metricName: 'h_sum' },
        ],
        new Set(['upstream']),
      );
      expect(merged).to.deep.equal([
        { labels: { le: 1, network: 'evm:1' }, value: 5, metricName: 'h_bucket' },
        { labels: { network: 'evm:1' }, value: 0.75, metricName: 'h_sum' },
      ]);
    });
    it('the exposition: every histogram of the registry filtered (prom-client and deferred ones), counters untouched, the registry itself unchanged', async () => {
      const reg = new Registry();
      const h = new Histogram({ name: 'svc_cordon_like_seconds', help: 'h', labelNames: ['project', 'upstream'], buckets: [1, 10], registers: [reg] });
      const d = new DeferredHistogram(reg, {
        name: 'svc_network_request_duration_seconds',
        help: 'd',
        labelNames: ['project', 'upstream', 'finality'],
        buckets: [1],
      });
      const c = new Counter({ name: 'svc_things_total', help: 'c', labelNames: ['upstream'], registers: [reg] });
      h.observe({ project: 'p', upstream: 'a' }, 0.5);
      h.observe({ project: 'p', upstream: 'b' }, 5);
      d.observe(d.child(['p', 'a', 'latest']), 0.5);
      d.observe(d.child(['p', 'b', 'latest']), 0.5);
      c.inc({ upstream: 'a' });
      const opts = metricsOptionsOf(
        load({ histogramDropLabels: ['upstream', 'finality'], histogramLabelOverrides: { network_request_duration_seconds: ['finality'] } }).metrics.settings,
      );
      const text = await new FilteredRegistry(reg, opts).metrics();
      expect(text).to.include('svc_cordon_like_seconds_bucket{le="1",project="p"} 1');
      expect(text).to.include('svc_cordon_like_seconds_bucket{le="10",project="p"} 2');
      expect(text).to.include('svc_cordon_like_seconds_count{project="p"} 2');
      expect(text).to.include('svc_network_request_duration_seconds_count{project="p",finality="latest"} 2');
      expect(text).to.not.match(/_seconds[a-z_]*\{[^}]*upstream=/);
      expect(text).to.include('svc_things_total{upstream="a"} 1');
      expect(await reg.metrics()).to.include('upstream="b"');
      // Names the filter cannot find on any histogram of the registry are reported.
      const odd = metricsOptionsOf(
        load({ histogramDropLabels: ['user', 'upstream'], histogramLabelOverrides: { cache_get_success_hit_duration_seconds: ['user'] } }).metrics.settings,
      );
      const warnings = await unknownFilterNames(reg, odd);
      expect(warnings[0]).to.match(/^metrics\.histogramDropLabels: user is a label of no histogram/);
      expect(warnings[1]).to.match(/^metrics\.histogramLabelOverrides: cache_get_success_hit_duration_seconds names no histogram/);
    });
    it("with nothing dropped the exposition is the registry's own text", async () => {
      const reg = new Registry();
      new Histogram({ name: 'x_seconds', help: 'x', labelNames: ['a'], buckets: [1], registers: [reg] }).observe({ a: '1' }, 1);
      const f = new FilteredRegistry(reg, metricsOptionsOf(load({ histogramLabelOverrides: { x_seconds: ['a'] } }).metrics.settings));
      expect(f.active).to.equal(false);
      expect(await f.metrics()).to.equal(await reg.metrics());
    });
  });

  describe('ownership', () => {
    it('the keys exist only with the metrics plugin (a preset without it refuses them)', () => {
      expect(() => loadConfigObject({ metrics: { histogramBuckets: '1,2' } }, { fragments: [] })).to.throw(/histogramBuckets/);
    });
    it('the core owns metrics.enabled/host/port: a plugin adding them is refused, naming both', () => {
      const msgs = fragmentCollisions([{ owner: 'mine', fragment: { extend: { metrics: { port: buildConfigSchema() } } } }]);
      expect(msgs).to.deep.equal(['config key metrics.port of plugin "mine" is already defined by the core']);
      expect(fragmentCollisions([{ owner: 'metrics', fragment: fragment() }])).to.deep.equal([]);
    });
  });
});

/**
 * svc's lifecycle metrics (plugins/metrics/lifecycle.ts, spec §3.2 and §6): the state gauge walks
 * serving → draining → closing → stopped with exactly one state at 1, the drain's start is set
 * once (a second signal does not move it), the in-flight gauge follows the drain's count, and the
 * metrics listener still answers, in state `stopped`, while the other shutdown taps run.
 */
import { EventEmitter } from 'node:events';
import type { Server } from 'node:http';
import FakeTimers from '@sinonjs/fake-timers';
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { Drain } from '../../../core/http/drain.ts';
import { createLogger } from '../../../lib/logger.ts';
import { createProxy } from '../../../core/host/create.ts';
import type { Plugin } from '../../../core/plugin-api.ts';
import { registerLifecycleMetrics } from '../../../plugins/metrics/lifecycle.ts';
import { metricsAddress, metricsPlugin } from '../../../plugins/metrics/index.ts';

/** A stand-in server: emits `request` with a response that emits `close` (as in core/drain.test.ts). */
function fakeServer(): { server: Server; request(): () => void } {
  const server = new EventEmitter() as unknown as Server;
  return {
    server,
    request() {
      const res = new EventEmitter();
      server.emit('request', {}, res);
      return () => res.emit('close');
    },
  };
}

/** The value of every series of one metric, keyed by its `state` label ('' for an unlabelled gauge). */
async function read(registry: Registry, name: string): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`${name} is not registered`);
  const { values } = await metric.get();
  return Object.fromEntries(values.map((v) => [String(v.labels.state ?? ''), v.value]));
}

/** Parses the exposition text into `name{labels}` → value. */
function samples(text: string): Map<string, number> {
  return new Map(
    text
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => {
        const i = l.lastIndexOf(' ');
        return [l.slice(0, i), Number(l.slice(i + 1))] as [string, number];
      }),
  );
}

describe('metrics plugin: lifecycle gauges (spec §3.2, §6)', () => {
  describe('collected from the drain on scrape', () => {
    const START = Date.UTC(2025, 0, 2, 3, 4, 5, 678);
    let clock: ReturnType<typeof FakeTimers.install>;
    beforeEach(() => {
      clock = FakeTimers.install({ now: START });
    });
    afterEach(() => clock.uninstall());

    it('state walks serving → draining → closing → stopped, one state at 1; the drain start is set once; in-flight follows the requests', async () => {
      const registry = new Registry();
      const drain = new Drain();
      const s = fakeServer();
      drain.track(s.server);
      registerLifecycleMetrics(registry, drain);
      const state = () => read(registry, 'svc_server_lifecycle_state');
      const started = async () => (await read(registry, 'svc_server_drain_started_timestamp_seconds'))[''];
      const inflight = async () => (await read(registry, 'svc_server_inflight_requests'))[''];

      expect(await state()).to.deep.equal({ serving: 1, draining: 0, closing: 0, stopped: 0 });
      expect(await started()).to.equal(0);
      expect(await inflight()).to.equal(0);

      const finishA = s.request();
      const finishB = s.request();
      expect(await inflight()).to.equal(2);
      finishA();
      expect(await inflight()).to.equal(1);

      await clock.tickAsync(60_000); // time passes while serving: the drain start stays 0
      expect(await started()).to.equal(0);

      let stopped = false;
      const timings = { waitBeforeMs: 15_000, waitAfterMs: 10_000 };
      const run = drain.run(timings, async () => {
        stopped = true;
      });
      const signalledAt = (START + 60_000) / 1000;
      expect(await state()).to.deep.equal({ serving: 0, draining: 1, closing: 0, stopped: 0 });
      expect(await started()).to.equal(signalledAt);

      await clock.tickAsync(5_000);
      // A second SIGTERM (run again) does not move the drain's start.
      expect(drain.run(timings, async () => undefined)).to.equal(run);
      expect(await started()).to.equal(signalledAt);

      await clock.tickAsync(10_000);
      expect(await state()).to.deep.equal({ serving: 0, draining: 0, closing: 1, stopped: 0 });
      expect(await inflight()).to.equal(1);
      expect(await started()).to.equal(signalledAt);

      finishB();
      await run;
      expect(stopped).to.equal(true);
      expect(await state()).to.deep.equal({ serving: 0, draining: 0, closing: 0, stopped: 1 });
      expect(await inflight()).to.equal(0);
      expect(await started()).to.equal(signalledAt);
    });

    it('a direct close without a drain is stopped with no drain start', async () => {
      const registry = new Registry();
      const drain = new Drain();
      registerLifecycleMetrics(registry, drain);
      drain.stopped();
      expect(await read(registry, 'svc_server_lifecycle_state')).to.deep.equal({ serving: 0, draining: 0, closing: 0, stopped: 1 });
      expect((await read(registry, 'svc_server_drain_started_timestamp_seconds'))['']).to.equal(0);
    });
  });

  it('the metrics plugin serves them at /metrics, and the listener still answers in state stopped while the other shutdown taps run', async () => {
    let duringShutdown: Map<string, number> | undefined;
    // Taps shutdown at the default stage, as the stores and pollers do.
    const probe: Plugin = {
      name: 'probe',
      apply(host) {
        host.hooks.shutdown.tapPromise('probe', async () => {
          const addr = metricsAddress(host);
          duringShutdown = samples(await (await fetch(`http://127.0.0.1:${addr?.port}/metrics`)).text());
        });
      },
    };
    const proxy = createProxy({
      config: { metrics: { enabled: true, port: 0 }, server: { waitBeforeShutdown: '0s', waitAfterShutdown: '0s' }, projects: [] },
      plugins: [metricsPlugin(), probe],
      logger: createLogger('silent'),
      port: 0,
      metricsPort: 0,
      host: '127.0.0.1',
    });
    await proxy.start();
    const port = metricsAddress(proxy)?.port;
    const before = samples(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
    expect(before.get('svc_server_lifecycle_state{state="serving"}')).to.equal(1);
    expect(before.get('svc_server_lifecycle_state{state="stopped"}')).to.equal(0);
    expect(before.get('svc_server_drain_started_timestamp_seconds')).to.equal(0);
    expect(before.get('svc_server_inflight_requests')).to.equal(0);

    const t0 = Date.now() / 1000;
    await proxy.shutdown();
    expect(duringShutdown, 'the probe scraped /metrics from its shutdown tap').to.not.equal(undefined);
    expect(duringShutdown?.get('svc_server_lifecycle_state{state="stopped"}')).to.equal(1);
    expect(duringShutdown?.get('svc_server_lifecycle_state{state="serving"}')).to.equal(0);
    expect(duringShutdown?.get('svc_server_drain_started_timestamp_seconds')).to.be.within(t0 - 1, t0 + 5);
    // Closed once every tap ran.
    const after = await fetch(`http://127.0.0.1:${port}/metrics`).then(
      () => 'answered',
      () => 'refused',
    );
    expect(after).to.equal('refused');
  });
});

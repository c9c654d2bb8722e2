/**
 * shared-state's Redis connections on a real redis-server (docs/operations.md "Fleet: shared
 * state"): a proxy built only to check a config (core/host/validate.ts: `svc validate` and every
 * config reload) opens none, however many validations run (CLIENT LIST stays where it was); a
 * started svc opens its three (commands, subscription, stream reader) and reads
 * `svc_shared_state_connected 1`; closing it, even while its connections are still being set up,
 * leaves none behind.
 */
import { expect } from 'chai';
import { createClient } from 'redis';
import { validateConfig } from '../../core/host/validate.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { httpRequest, startSvc, waitFor } from '../helpers/svc.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('e2e: shared-state Redis connections', function () {
  this.timeout(60_000);
  let redis: RedisHandle;
  let probe: ReturnType<typeof createClient>;

  const config = () => ({
    metrics: { enabled: true },
    sharedState: { redis: { uri: redis.url }, clusterKey: 'conn-test' },
    projects: [
      { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 } }], upstreams: [{ id: 'a', endpoint: 'http://127.0.0.1:9', evm: { chainId: 1 } }] },
    ],
  });
  /** Connections the server holds, the probe's own left out. */
  const clients = async (): Promise<number> => (await probe.clientList()).length - 1;

  before(async () => {
    redis = await startRedis();
    probe = createClient({ url: redis.url });
    await probe.connect();
  });

  after(async () => {
    await probe?.close();
    await redis?.stop();
  });

  it('20 validations of a config with sharedState open no connection', async () => {
    const before = await clients();
    for (let i = 0; i < 20; i++) await validateConfig({ config: config(), plugins: defaultPreset() });
    // A connection opened in the background would show up within a few ms on localhost.
    await sleep(300);
    expect(await clients()).to.equal(before);
  });

  it('a started svc connects (three connections, gauge 1); closed, it leaves none', async () => {
    const before = await clients();
    const svc = await startSvc(config());
    try {
      await waitFor(async () => (await httpRequest('GET', svc.metricsUrl!)).text.includes('svc_shared_state_connected 1'), 5000);
      expect(await clients()).to.equal(before + 3);
    } finally {
      await svc.close();
    }
    await waitFor(async () => (await clients()) === before, 2000);
  });

  it('an svc closed while its connections are being set up leaves none (ten times)', async () => {
    const before = await clients();
    for (let i = 0; i < 10; i++) {
      const svc = await startSvc(config());
      await svc.close();
    }
    await sleep(300);
    await waitFor(async () => (await clients()) === before, 3000);
  });
});

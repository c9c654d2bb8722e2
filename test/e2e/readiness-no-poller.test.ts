/**
 * Readiness without the state poller (spec §4.3): an upstream with
 * `evm.statePollerInterval: 0` is initialised once its chain-id probe confirms the chain, so
 * every strategy of §4.3 passes on a serving network, per network and globally, with no client
 * traffic at all (a readiness probe gets none before it passes). An upstream that never answers
 * its probe still fails them.
 */
import { expect } from 'chai';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const STRATEGIES = [
  'any:initializedUpstreams',
  'any:errorRateBelow90',
  'all:errorRateBelow90',
  'any:errorRateBelow100',
  'all:errorRateBelow100',
  'any:evm:eth_chainId',
  'all:evm:eth_chainId',
  'all:activeUpstreams',
] as const;

/** A project with one upstream whose state poller is off. */
function project(url: string) {
  return {
    id: 'main',
    networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
    upstreams: [{ id: 'a', endpoint: url, evm: { chainId: 1, statePollerInterval: 0 } }],
  };
}

describe('e2e: readiness with the state poller off', function () {
  this.timeout(20_000);
  let up: FaultServer;
  let svc: SvcHandle | undefined;

  beforeEach(async () => {
    up = await startFaultServer({ chainId: 1 });
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    await up?.close();
  });

  /** A fresh server per strategy: no earlier probe (a live eth_chainId one included) is traffic it could lean on. */
  async function fresh(): Promise<SvcHandle> {
    svc = await startSvc({ ...NO_CACHE, metrics: { enabled: false }, projects: [project(up.url)] });
    // The chain-id probe is the only start-up step.
    await waitFor(() => up.calls.some((c) => c.method === 'eth_chainId'));
    return svc;
  }

  for (const s of STRATEGIES) {
    it(`§4.3 ${s} — passes with statePollerInterval 0 and no client traffic, per network and globally`, async () => {
      const h = await fresh();
      // A readiness probe polls until it passes; it never passed before (poll, no traffic).
      await waitFor(async () => (await h.send('GET', `/main/evm/1/healthcheck?eval=${s}`)).status === 200, 3000);
      for (const path of [`/main/evm/1/healthcheck?eval=${s}`, `/main/evm/1?eval=${s}`, `/healthcheck?eval=${s}`]) {
        const r = await h.send('GET', path);
        expect(r.status, `${path}: ${r.text}`).to.equal(200);
        expect(r.json.status).to.equal('OK');
      }
      // No state poll and no client call was ever sent.
      expect(up.calls.filter((c) => c.method !== 'eth_chainId').map((c) => c.method)).to.deep.equal([]);
    });
  }

  it('§4.3 any:initializedUpstreams — the default strategy names the upstream initialised: "1 / 1 upstreams initialized"', async () => {
    const h = await fresh();
    await waitFor(async () => (await h.send('GET', '/main/evm/1/healthcheck')).status === 200, 3000);
    const r = await h.send('GET', '/main/evm/1/healthcheck');
    expect(r.json.message).to.equal('1 / 1 upstreams initialized');
  });

  it('§4.3 any:initializedUpstreams — with the poller off, an upstream that never answers its chain-id probe is not initialised (503)', async () => {
    const dead = await startFaultServer({ chainId: 1 });
    const url = dead.url;
    await dead.close();
    const s = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      projects: [{ id: 'main', upstreams: [{ id: 'gone', endpoint: url, evm: { chainId: 1, statePollerInterval: 0 } }] }],
    });
    try {
      for (const st of STRATEGIES) {
        const r = await s.send('GET', `/healthcheck?eval=${st}`);
        expect(r.status, st).to.equal(503);
      }
    } finally {
      await s.close();
    }
  });
});

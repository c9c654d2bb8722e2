/**
 * End-to-end selection policy (spec §1.3, §3.1): three fake upstreams behind svc. A cordon
 * takes traffic off an upstream with the very next request (no tick in between: the interval
 * is an hour), and a selection function written in a TypeScript config file replaces the
 * default policy.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { readConfigFile } from '../../config/load.ts';
import { selectionState } from '../../plugins/selection/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const body = { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] };

describe('e2e: selection policy', function () {
  this.timeout(20_000);

  let servers: Record<'a' | 'b' | 'c', FaultServer>;
  let svc: SvcHandle | undefined;
  let dir: string | undefined;

  const served = (s: FaultServer) => s.calls.filter((c) => c.method === 'eth_blockNumber').length;
  const upstreams = () => (['a', 'b', 'c'] as const).map((id) => ({ id, endpoint: servers[id].url, evm: { chainId: CHAIN } }));

  beforeEach(async () => {
    servers = { a: await startFaultServer(), b: await startFaultServer(), c: await startFaultServer() };
  });

  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    await Promise.all(Object.values(servers).map((s) => s.close()));
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('use-upstream pins a tier:fallback upstream held back while others serve; a cordoned one is named, not "no match"', async () => {
    const tagged = upstreams().map((u) => (u.id === 'c' ? { ...u, tags: ['tier:fallback'] } : u));
    svc = await startSvc(
      { ...NO_CACHE, logLevel: 'error', projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }], upstreams: tagged }] },
      { plugins: defaultPreset() },
    );
    const path = `/main/evm/${CHAIN}`;
    expect((await svc.post(path, body)).headers['x-svc-upstream']).to.equal('a');
    const pinned = await svc.post(path, body, { 'x-svc-use-upstream': 'c' });
    expect(pinned.json.result).to.equal('0x10');
    expect(pinned.headers['x-svc-upstream']).to.equal('c');
    svc.proxy.projects.get('main')!.health.cordon('c', '*', 'operator');
    const refused = await svc.post(path, body, { 'x-svc-use-upstream': 'c' });
    expect(refused.json.error.message).to.match(/use-upstream "c" matches only upstreams left out of this call: c \(cordoned: operator\)/);
    expect(served(servers.c)).to.equal(1);
  });

  it('a cordoned upstream gets no traffic from the next request on', async () => {
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        projects: [
          { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } }], upstreams: upstreams() },
        ],
      },
      { plugins: defaultPreset() },
    );
    const r1 = await svc.post(`/main/evm/${CHAIN}`, body);
    expect(r1.json.result).to.equal('0x10');
    expect(r1.headers['x-svc-upstream']).to.equal('a');
    svc.proxy.projects.get('main')!.health.cordon('a', '*', 'e2e');
    const before = served(servers.a);
    for (let i = 0; i < 5; i++) {
      const r = await svc.post(`/main/evm/${CHAIN}`, body);
      expect(r.json.result).to.equal('0x10');
      expect(r.headers['x-svc-upstream']).to.equal('b');
    }
    expect(served(servers.a)).to.equal(before);
    expect(served(servers.b)).to.equal(5);
  });

  it('a selection function in a TypeScript config takes effect', async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-selection-'));
    const file = join(dir, 'svc.config.ts');
    await writeFile(
      file,
      `interface U { id: string }
export default {
  logLevel: 'error',
  projects: [{
    id: 'main',
    networks: [{
      architecture: 'evm',
      evm: { chainId: ${CHAIN} },
      selectionPolicy: {
        evalInterval: '1h',
        // Newest first, and never 'a'.
        evalFunc: (upstreams: U[]): U[] => upstreams.filter((u) => u.id !== 'a').reverse(),
      },
    }],
    upstreams: ${JSON.stringify(upstreams())},
  }],
};
`,
    );
    svc = await startSvc({ ...((await readConfigFile(file)) as object), ...NO_CACHE }, { plugins: defaultPreset() });
    expect(selectionState(svc.proxy, 'main', `evm:${CHAIN}`)).to.deep.include({ order: ['c', 'b'], custom: true });
    for (let i = 0; i < 3; i++) {
      const r = await svc.post(`/main/evm/${CHAIN}`, body);
      expect(r.json.result).to.equal('0x10');
      expect(r.headers['x-svc-upstream']).to.equal('c');
    }
    expect(served(servers.a)).to.equal(0);
    expect(served(servers.c)).to.equal(3);
  });
});

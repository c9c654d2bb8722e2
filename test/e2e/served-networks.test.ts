/**
 * What a project serves, said where a newcomer looks (spec §4.1): a network found after start (an upstream with no declared network,
 * found by its `eth_chainId` probe) is logged with its path, and a 404 for a network the project does not serve lists the paths it does.
 * A local anvil is chain 31337, not 1: the quick start's `/evm/1` must point the way to `/evm/31337`.
 */
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { httpRequest, NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const call = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });

describe('e2e: the networks a project serves, at start-up and in a 404 (spec §4.1)', function () {
  this.timeout(20_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  let url: string;
  const logs: Array<{ msg: string; network?: string; path?: string; project?: string }> = [];

  before(async () => {
    anvil = await startAnvil();
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) logs.push(JSON.parse(l));
        cb();
      },
    });
    // No network declared: the network is found from the upstream's chain id after start.
    svc = await startSvc(
      { ...NO_CACHE, projects: [{ id: 'main', upstreams: [{ id: 'local', endpoint: anvil.url }] }] },
      { logger: pino({ level: 'info' }, sink) },
    );
    url = svc.url;
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  it('a network found after start is logged once with its path', async () => {
    await waitFor(() => logs.some((l) => l.msg === `network evm:${anvil.chainId} is served`));
    const line = logs.filter((l) => l.msg === `network evm:${anvil.chainId} is served`);
    expect(line).to.have.length(1);
    expect(line[0]).to.include({ project: 'main', network: `evm:${anvil.chainId}`, path: `/main/evm/${anvil.chainId}` });
    const ok = await httpRequest('POST', `${url}/main/evm/${anvil.chainId}`, call);
    expect(ok.json.result).to.equal(`0x${anvil.chainId.toString(16)}`);
  });

  it("a 404 for another chain (the quick start's /evm/1 against a local node) names the path that is served", async () => {
    await waitFor(() => svc.proxy.projects.get('main')?.networks.has(`evm:${anvil.chainId}`) === true);
    const r = await httpRequest('POST', `${url}/main/evm/1`, call);
    expect(r.status).to.equal(404);
    expect(r.json.error.message).to.equal(`network evm:1 is not supported by project main; served: /main/evm/${anvil.chainId}`);
    const alias = await httpRequest('POST', `${url}/main/mainnet`, call);
    expect(alias.status).to.equal(404);
    expect(alias.json.error.message).to.equal(`network alias "mainnet" is not known in project main; served: /main/evm/${anvil.chainId}`);
  });
});

/**
 * Conformance, spec §7 (errors): every row triggered through a real svc in front of real anvil,
 * with scripted upstreams for the outbound-batch failures and an unreachable one for an
 * unhealthy network.
 */
import { expect } from 'chai';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { freePort } from '../helpers/ports.ts';
import type { SvcResponse } from '../helpers/svc.ts';
import { rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';

/** The error's wire name, wherever svc puts it (body or X-SVC-Error). */
const errorText = (r: SvcResponse): string => `${JSON.stringify(r.json?.error ?? r.json)} ${r.headers['x-svc-error'] ?? ''}`;

describe('conformance: §7 errors', function () {
  this.timeout(20_000);
  let f: CoreFixture;
  let hang: FaultServer;
  let garbage: FaultServer;
  before(async () => {
    hang = await startFaultServer({ scriptBatch: true });
    hang.setDefault({ kind: 'hang' });
    garbage = await startFaultServer({ scriptBatch: true });
    garbage.setDefault({ kind: 'garbage' });
    const deadPort = await freePort();
    f = await startCoreFixture({}, {}, (anvil) => {
      const net = [{ architecture: 'evm', evm: { chainId: anvil.chainId } }];
      const batchUp = (id: string, url: string) => ({
        id,
        endpoint: url,
        evm: { chainId: anvil.chainId, statePollerInterval: 0 },
        jsonRpc: { supportsBatch: true, batchMaxSize: 2, batchMaxWait: '20ms' },
        failsafe: [{ matchMethod: '*', timeout: { duration: '300ms' } }],
      });
      return [
        { id: 'zero' },
        {
          id: 'dead',
          networks: net,
          upstreams: [{ id: 'd', endpoint: `http://127.0.0.1:${deadPort}`, evm: { chainId: anvil.chainId, statePollerInterval: 0 } }],
        },
        { id: 'bhang', networks: net, upstreams: [batchUp('h', hang.url)] },
        { id: 'bgarbage', networks: net, upstreams: [batchUp('g', garbage.url)] },
      ];
    });
  });
  after(async () => {
    await hang?.close();
    await garbage?.close();
    await f?.close();
  });
  const chain = () => f.anvil.chainId;

  it('§7 EndpointUnsupported: admin method <name> is not supported — unknown admin method, names case-sensitive', async () => {
    expect((await f.admin('svc_Taxonomy')).json.error.message).to.equal('EndpointUnsupported: admin method svc_Taxonomy is not supported');
    expect((await f.admin('svc_nope')).json.error.message).to.equal('EndpointUnsupported: admin method svc_nope is not supported');
  });

  it('§7 InvalidRequest: requires params: ... — wrong param count, with the expected shape', async () => {
    expect((await f.admin('svc_project', [])).json.error.message).to.equal('InvalidRequest: requires params: [projectId]');
    expect((await f.admin('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a' }, 'extra'])).json.error.message).to.match(
      /^InvalidRequest: requires params: \[\{projectId, upstream, method\?, reason\?\}\]/,
    );
  });

  it('§7 InvalidRequest: first parameter must be an object — API-key or cordon method with positional args', async () => {
    expect((await f.admin('svc_cordonUpstream', ['main', 'a'])).json.error.message).to.equal('InvalidRequest: first parameter must be an object');
    expect((await f.admin('svc_listApiKeys', ['keys', 'mem'])).json.error.message).to.equal('InvalidRequest: first parameter must be an object');
  });

  it('§7 failed to find the service: ... — (projectId, connectorId) does not resolve', async () => {
    const r = await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'nope', apiKey: 'k_0123456789abcdef0123456789abcdef', userId: 'u' }]);
    expect(r.json.error.message).to.match(/^failed to find the service: /);
    expect((await f.admin('svc_listApiKeys', [{ projectId: 'nope', connectorId: 'mem' }])).json.error.message).to.match(/^failed to find the service: /);
  });

  it('§7 HTTP 503 HealthcheckUnhealthy with message and details — an unhealthy network', async () => {
    const r = await f.svc.send('GET', `/dead/evm/${chain()}/healthcheck?eval=all:evm:eth_chainId`);
    expect(r.status).to.equal(503);
    expect(r.json.code).to.equal('HealthcheckUnhealthy');
    expect(r.json.message).to.be.a('string').that.is.not.empty;
    expect(r.json).to.have.property('details');
  });

  it('§7 HTTP 503 unknown evaluation strategy: <name> — an unrecognised eval', async () => {
    const r = await f.svc.send('GET', '/healthcheck?eval=any:magic');
    expect(r.status).to.equal(503);
    expect(r.text).to.include('unknown evaluation strategy: any:magic');
  });

  it('§7 HTTP 400 ErrJsonRpcRequestUnmarshal — a batch body that does not parse', async () => {
    const r = await f.svc.post(f.path, '[{"jsonrpc":"2.0","id":1,');
    expect(r.status).to.equal(400);
    expect(errorText(r)).to.include('ErrJsonRpcRequestUnmarshal');
  });

  it('§7 HTTP 404 ErrNetworkNotSupported — an unknown chain in zero-config mode', async () => {
    const r = await f.svc.post('/zero/evm/987654', rpc('eth_chainId', []));
    expect(r.status).to.equal(404);
    expect(errorText(r)).to.include('ErrNetworkNotSupported');
  });

  it('§7 ErrUpstreamsExhausted — a use-upstream selector matching nothing (no separate selector error)', async () => {
    const r = await f.svc.post(`${f.path}?use-upstream=nothing-matches`, rpc('eth_blockNumber', []));
    expect(errorText(r)).to.include('ErrUpstreamsExhausted');
  });

  it('§7 ErrNotImplemented — a stateful method with several upstreams matching use-upstream', async () => {
    const r = await f.svc.post(`${f.path}?use-upstream=*`, rpc('eth_newFilter', [{ fromBlock: '0x0' }]));
    expect(errorText(r)).to.include('ErrNotImplemented');
  });

  it('§7 ErrEndpointContentValidation — a validation directive failed (X-SVC-Integrity: intrinsic on a block whose hash does not match its header)', async () => {
    // The scripted upstream's blocks carry made-up hashes: an intrinsic check cannot pass.
    const liar = await startFaultServer();
    const { startSvc } = await import('../helpers/svc.ts');
    const s = await startSvc({
      logLevel: 'error',
      metrics: { enabled: false },
      projects: [
        {
          id: 'n',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
          upstreams: [{ id: 'x', endpoint: liar.url, evm: { chainId: 31337, statePollerInterval: 0 } }],
        },
      ],
    });
    try {
      const r = await s.post('/n/evm/31337', rpc('eth_getBlockByNumber', ['0x5', false]), { 'x-svc-integrity': 'intrinsic' });
      expect(r.json.result).to.equal(undefined);
      expect(errorText(r)).to.include('ErrEndpointContentValidation');
    } finally {
      await s.close();
      await liar.close();
    }
  });

  it('§7 ErrEndpointRequestTimeout — the outbound batch deadline passed', async () => {
    // The upstream never answers: only the deadline ends the calls (else mocha's timeout fails the test).
    const r = await f.svc.post(`/bhang/evm/${chain()}`, [
      rpc('eth_getBalance', ['0x0000000000000000000000000000000000000001', '0x1'], 1),
      rpc('eth_getBalance', ['0x0000000000000000000000000000000000000002', '0x1'], 2),
    ]);
    expect(r.json).to.have.length(2);
    expect(r.json.map((e: { id: unknown }) => e.id)).to.deep.equal([1, 2]);
    for (const e of r.json as Array<{ error: unknown }>) expect(JSON.stringify(e.error)).to.include('ErrEndpointRequestTimeout');
  });

  it('§7 ErrUpstreamMalformedResponse — an upstream answering a batch with non-JSON', async () => {
    const r = await f.svc.post(`/bgarbage/evm/${chain()}`, [
      rpc('eth_getBalance', ['0x0000000000000000000000000000000000000001', '0x1'], 1),
      rpc('eth_getBalance', ['0x0000000000000000000000000000000000000002', '0x1'], 2),
    ]);
    expect(r.json).to.have.length(2);
    expect(r.json.map((e: { id: unknown }) => e.id)).to.deep.equal([1, 2]);
    for (const e of r.json as Array<{ error: unknown }>) expect(JSON.stringify(e.error)).to.include('ErrUpstreamMalformedResponse');
  });
});

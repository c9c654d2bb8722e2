/**
 * SIWE messages on the memory store with `server.workers: 2` (docs/access.md "SIWE"): the primary
 * holds the used messages for every worker (as it holds memory rate-limit budgets), so a signed
 * message is accepted once by the replica, whichever worker each connection reaches. Each call
 * goes on its own connection (`Connection: close`), which the primary hands to the workers in
 * turn.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { createSiweMessage } from 'viem/siwe';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { listeningPids, spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';
import { waitFor } from '../helpers/svc.ts';

const DOMAIN = 'dapp.test';

describe('e2e: a SIWE message is accepted once across server.workers (memory store)', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let svc: SvcProcess;
  let dir: string;
  const account = privateKeyToAccount(generatePrivateKey());
  let seq = 0;

  const message = () =>
    createSiweMessage({
      address: account.address,
      chainId: anvil.chainId,
      domain: DOMAIN,
      nonce: `workers${Date.now()}n${++seq}`,
      uri: `https://${DOMAIN}/login`,
      version: '1',
      issuedAt: new Date(),
    });

  /** One call signed with `m`, on its own connection: the HTTP status. */
  async function send(m: string, signature: string): Promise<number> {
    const r = await request(`${svc.url}/mem/evm/${anvil.chainId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close', 'x-siwe-message': Buffer.from(m).toString('base64'), 'x-siwe-signature': signature },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
    });
    await r.body.text();
    return r.statusCode;
  }

  before(async () => {
    [anvil] = await Promise.all([startAnvil(), ensureBuilt()]);
    dir = mkdtempSync(join(tmpdir(), 'svc-siwe-workers-'));
    svc = await spawnSvc(dir, 'siwe-workers', {
      logLevel: 'info',
      server: { workers: 2, waitBeforeShutdown: '0s', waitAfterShutdown: '0s' },
      metrics: { enabled: false },
      database: { evmJsonRpcCache: { connectors: [], policies: [] } },
      projects: [
        {
          id: 'mem',
          networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
          auth: { strategies: [{ type: 'siwe', siwe: { allowedDomains: [DOMAIN] } }] },
        },
      ],
    });
    await waitFor(() => listeningPids(svc.logs()).length >= 2, 20_000);
  });
  after(async () => {
    await svc?.stop();
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the same signed message sent on six connections (both workers) is accepted once; a new message is accepted', async () => {
    const m = message();
    const signature = await account.signMessage({ message: m });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await send(m, signature));
    expect(
      statuses.filter((s) => s === 200),
      statuses.join(),
    ).to.have.length(1);
    expect(
      statuses.filter((s) => s === 401),
      statuses.join(),
    ).to.have.length(5);
    const fresh = message();
    expect(await send(fresh, await account.signMessage({ message: fresh }))).to.equal(200);
  });

  it('concurrent copies of one message on separate connections: exactly one is accepted', async () => {
    const m = message();
    const signature = await account.signMessage({ message: m });
    const statuses = await Promise.all(Array.from({ length: 8 }, () => send(m, signature)));
    expect(
      statuses.filter((s) => s === 200),
      statuses.join(),
    ).to.have.length(1);
  });
});

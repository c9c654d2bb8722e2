/**
 * Graceful drain (spec §3.2) on the real `svc start` process: SIGTERM while
 * slow calls are in flight loses none of them; during `waitBeforeShutdown` the healthcheck is 503
 * and calls are still served; after it a new request gets 503 `ErrServiceShuttingDown` with
 * `Connection: close`; once the in-flight calls are answered the process exits 0.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { freePort } from '../helpers/ports.ts';
import { httpRequest, waitFor } from '../helpers/svc.ts';

const SLOW_MS = 1500;

describe('e2e: graceful drain on SIGTERM (spec §3.2)', function () {
  this.timeout(30_000);
  let up: FaultServer;
  let dir: string;
  before(async () => {
    await ensureBuilt();
    up = await startFaultServer({ chainId: 1 });
    dir = mkdtempSync(join(tmpdir(), 'svc-drain-'));
  });
  after(async () => {
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('no in-flight call is lost; the healthcheck turns 503 at once; new requests are refused with Connection: close after waitBeforeShutdown; exit 0', async () => {
    const file = join(dir, 'svc.json');
    writeFileSync(
      file,
      JSON.stringify({
        logLevel: 'info',
        database: { evmJsonRpcCache: { connectors: [], policies: [] } },
        server: { waitBeforeShutdown: '500ms', waitAfterShutdown: '10s' },
        projects: [
          { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 } }], upstreams: [{ id: 'slow', endpoint: up.url, evm: { chainId: 1 } }] },
        ],
      }),
    );
    const port = await freePort();
    const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), 'start', '--config', file, '--port', String(port), '--metrics-port', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let logs = '';
    child.stdout?.on('data', (d: Buffer) => (logs += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (logs += d.toString()));
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const base = `http://127.0.0.1:${port}`;
    // Distinct addresses: identical calls would be multiplexed into one upstream request.
    const call = (id: number) =>
      httpRequest(
        'POST',
        `${base}/main/evm/1`,
        JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [`0x${id.toString(16).padStart(40, '0')}`, 'latest'] }),
      );
    try {
      await waitFor(async () => (await httpRequest('GET', `${base}/healthcheck`).catch(() => undefined))?.status === 200, 15_000);
      // From now on every upstream call takes SLOW_MS.
      up.setDefault({ kind: 'delay', ms: SLOW_MS, then: { kind: 'ok', result: '0x1' } });
      const inFlight = [1, 2, 3, 4, 5, 6, 7, 8].map(call);
      await waitFor(() => up.calls.filter((c) => c.method === 'eth_getBalance').length >= 8);
      const signalled = Date.now();
      child.kill('SIGTERM');

      const health = await waitForStatus(`${base}/healthcheck`, 503);
      expect(health.json).to.include({ code: 'HealthcheckUnhealthy', message: 'shutting down' });
      // Still serving during waitBeforeShutdown.
      const during = call(100);
      await waitFor(() => Date.now() - signalled > 700);
      const refused = await call(200);
      expect(refused.status).to.equal(503);
      expect(refused.json.error.data.code).to.equal('ErrServiceShuttingDown');
      expect(refused.headers.connection).to.equal('close');

      const answers = await Promise.all([...inFlight, during]);
      for (const a of answers) {
        expect(a.status).to.equal(200);
        expect(a.json.result).to.equal('0x1');
      }
      expect(await exit).to.equal(0);
      expect(logs).to.include('drained: exiting');
    } finally {
      up.setDefault({ kind: 'ok' });
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});

async function waitForStatus(url: string, status: number): Promise<Awaited<ReturnType<typeof httpRequest>>> {
  let last: Awaited<ReturnType<typeof httpRequest>> | undefined;
  await waitFor(async () => {
    last = await httpRequest('GET', url);
    return last.status === status;
  }, 5000);
  return last as Awaited<ReturnType<typeof httpRequest>>;
}

/**
 * Project CORS and the CORS config rule in `svc validate` (spec §2.5): without
 * `cors` no CORS headers and OPTIONS is 204; with it, the admin defaults widened for directive
 * headers and diagnostic headers, preflights answered before auth.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';

describe('e2e: project CORS', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  const origin = 'https://app.dapp.example';

  before(async () => {
    anvil = await startAnvil();
    const project = (id: string, extra: object) => ({
      id,
      networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
      upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
      ...extra,
    });
    svc = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      projects: [
        project('open', {}),
        project('dapp', {
          cors: { allowedOrigins: ['https://*.dapp.example'] },
          auth: { strategies: [{ type: 'secret', secret: { value: 'dapp-secret-0123456789' } }] },
        }),
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });
  const path = (p: string) => `/${p}/evm/${anvil.chainId}`;
  const call = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });

  it('without cors: no CORS headers, and OPTIONS is 204', async () => {
    const pre = await svc.send('OPTIONS', path('open'), undefined, { origin, 'access-control-request-method': 'POST' });
    expect(pre.status).to.equal(204);
    expect(pre.headers['access-control-allow-origin']).to.equal(undefined);
    const r = await svc.post(path('open'), call, { origin });
    expect(r.headers['access-control-allow-origin']).to.equal(undefined);
  });

  it('with cors: a preflight from a listed origin is 204 before auth, allowing the directive headers', async () => {
    const pre = await svc.send('OPTIONS', path('dapp'), undefined, {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type,x-svc-skip-cache-read',
    });
    expect(pre.status).to.equal(204);
    expect(pre.headers['access-control-allow-origin']).to.equal(origin);
    const allowed = pre.headers['access-control-allow-headers']?.split(',') ?? [];
    for (const h of [
      'content-type',
      'authorization',
      'x-svc-secret-token',
      'x-svc-retry-empty',
      'x-svc-use-upstream',
      'x-svc-integrity',
      'x-svc-enforce-non-null-tagged-blocks',
    ])
      expect(allowed).to.include(h);
    expect(pre.headers['access-control-max-age']).to.equal('3600');
  });

  it('answers carry the origin and expose the diagnostic headers; another origin gets none', async () => {
    const r = await svc.post(path('dapp'), call, { origin, 'x-svc-secret-token': 'dapp-secret-0123456789' });
    expect(r.status).to.equal(200);
    expect(r.headers['access-control-allow-origin']).to.equal(origin);
    // Both reasons a shared cache must key this answer: the origin (CORS) and the encoding (gzip is on by default).
    expect(r.headers.vary)
      .to.match(/\bOrigin\b/i)
      .and.match(/\bAccept-Encoding\b/i);
    const exposed = r.headers['access-control-expose-headers']?.split(',') ?? [];
    for (const h of ['X-SVC-Version', 'X-SVC-Upstream', 'X-SVC-Attempts', 'X-SVC-Cache', 'X-SVC-Duration', 'X-SVC-Upstreams']) expect(exposed).to.include(h);
    const other = await svc.post(path('dapp'), call, { origin: 'https://evil.example', 'x-svc-secret-token': 'dapp-secret-0123456789' });
    expect(other.headers['access-control-allow-origin']).to.equal(undefined);
  });

  it('start-up warns when admin is guarded only by a network strategy while its origins contain *', async () => {
    await ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'svc-cors-warn-'));
    let p: SvcProcess | undefined;
    try {
      p = await spawnSvc(dir, 'warn', {
        admin: { auth: { strategies: [{ type: 'network', network: { allowLocalhost: true } }] }, cors: { allowedOrigins: ['*'] } },
        projects: [{ id: 'p', upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: anvil.chainId } }] }],
      });
      expect(p.logs()).to.include('admin is guarded only by a network strategy');
    } finally {
      await p?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('`svc validate` rejects allowCredentials with a * origin (admin and projects)', async () => {
    await ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'svc-cors-'));
    try {
      for (const [name, cfg] of [
        ['admin', { admin: { cors: { allowedOrigins: ['*'], allowCredentials: true } }, projects: [] }],
        [
          'project',
          { projects: [{ id: 'p', cors: { allowCredentials: true }, upstreams: [{ id: 'a', endpoint: 'http://127.0.0.1:1/', evm: { chainId: 1 } }] }] },
        ],
      ] as const) {
        const file = join(dir, `${name}.json`);
        writeFileSync(file, JSON.stringify(cfg));
        const r = spawnSync(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), 'validate', '--config', file], { encoding: 'utf8' });
        expect(r.status, name).to.equal(1);
        expect(r.stderr + r.stdout).to.match(/allowCredentials.*must be false when allowedOrigins contains "\*"/);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

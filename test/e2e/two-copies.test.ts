/**
 * Two installed copies of svc: a plugin built against ANOTHER copy of the
 * package (its own module instances, so its own error classes) throws that copy's errors inside
 * this svc. svc's errors are recognised by a shared brand (`Symbol.for('svc.error')`) and their
 * name, not by class identity, so the client still gets the error's code, HTTP status and its
 * own id — not HTTP 500 `ErrInternal` with id null.
 *
 * The second copy is the compiled package (dist/ and package.json) copied to a temp dir, with
 * node_modules linked to this repo's so its dependencies resolve; the svc under test runs from
 * this repo's sources.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { ErrEndpointCapacityExceeded, ErrNotImplemented, SvcError, isSvcError } from '../../core/wire/errors.ts';
import type { Plugin } from '../../core/host/host.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { defaultPreset } from '../../presets/default.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';

type PluginApi = typeof import('../../core/plugin-api.ts') & typeof import('../../core/plugin-errors.ts');

const CAPACITY_MARKER = 'acme_capacityMarker';

describe('e2e: errors thrown by a plugin built against another copy of svc', function () {
  this.timeout(60_000);
  let tmp: string;
  let copy: PluginApi;
  let upstream: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    await ensureBuilt();
    tmp = mkdtempSync(join(tmpdir(), 'svc-two-copies-'));
    const root = join(tmp, 'svc-copy');
    mkdirSync(root);
    cpSync(join(PACKAGE_ROOT, 'dist'), join(root, 'dist'), { recursive: true });
    cpSync(join(PACKAGE_ROOT, 'package.json'), join(root, 'package.json'));
    symlinkSync(join(PACKAGE_ROOT, 'node_modules'), join(root, 'node_modules'), 'dir');
    copy = {
      ...((await import(pathToFileURL(join(root, 'dist', 'core', 'plugin-api.js')).href)) as object),
      ...((await import(pathToFileURL(join(root, 'dist', 'core', 'plugin-errors.js')).href)) as object),
    } as PluginApi;

    // A plugin written against the copy only: its stage constant and its error classes.
    const copyPlugin: Plugin = {
      name: 'other-copy',
      apply(host) {
        host.hooks.call.tap({ name: 'other-copy', stage: copy.CallStage.LOCAL_METHODS }, (inner) => (ctx) => {
          if (ctx.request.method === 'eth_accounts') return Promise.reject(new copy.ErrNotImplemented('eth_accounts refused by the other copy'));
          if (ctx.request.method === CAPACITY_MARKER) return Promise.reject(new copy.ErrEndpointCapacityExceeded('capacity exceeded (other copy)'));
          return inner(ctx);
        });
      },
    };
    upstream = await startFaultServer({ chainId: 31337 });
    svc = await startSvc(
      { projects: [{ id: 'main', upstreams: [{ id: 'up', endpoint: upstream.url, evm: { chainId: 31337 } }] }] },
      { plugins: [...defaultPreset(), copyPlugin] },
    );
  });

  after(async () => {
    await svc?.close();
    await upstream?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("the copy's classes are distinct from this svc's, yet recognised by brand and name", () => {
    expect(copy.ErrNotImplemented).to.not.equal(ErrNotImplemented);
    expect(copy.SVC_ERROR_BRAND).to.equal(Symbol.for('svc.error'));
    const e = new copy.ErrNotImplemented('x');
    expect(isSvcError(e)).to.equal(true);
    expect(e instanceof SvcError).to.equal(true);
    expect(e instanceof ErrNotImplemented).to.equal(true);
    expect(e instanceof ErrEndpointCapacityExceeded).to.equal(false);
    expect(new ErrEndpointCapacityExceeded('y') instanceof copy.ErrEndpointCapacityExceeded).to.equal(true);
  });

  it("eth_accounts: the copy's ErrNotImplemented reaches the client as -32601, HTTP 200, with the caller's id", async () => {
    const r = await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: 42, method: 'eth_accounts', params: [] });
    expect(r.status, r.text).to.equal(200);
    expect(r.json.id).to.equal(42);
    expect(r.json.error.code).to.equal(-32601);
    expect(r.json.error.message).to.include('refused by the other copy');
    expect(r.headers['x-svc-error']).to.equal('ErrNotImplemented');
    expect(upstream.calls.filter((c) => c.method === 'eth_accounts')).to.have.length(0);
  });

  it("a capacity error from the copy keeps -32005 and HTTP 429, with the caller's id", async () => {
    const r = await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: 'cap-1', method: CAPACITY_MARKER, params: [] });
    expect(r.status, r.text).to.equal(429);
    expect(r.json.id).to.equal('cap-1');
    expect(r.json.error.code).to.equal(-32005);
    expect(r.headers['x-svc-error']).to.equal('ErrEndpointCapacityExceeded');
  });

  it('in a batch each element keeps its own id and code', async () => {
    const r = await svc.post('/main/evm/31337', [
      { jsonrpc: '2.0', id: 1, method: 'eth_accounts', params: [] },
      { jsonrpc: '2.0', id: 2, method: CAPACITY_MARKER, params: [] },
    ]);
    expect(r.status, r.text).to.equal(200);
    const byId = new Map((r.json as { id: number; error: { code: number } }[]).map((x) => [x.id, x.error.code]));
    expect(byId.get(1)).to.equal(-32601);
    expect(byId.get(2)).to.equal(-32005);
  });
});

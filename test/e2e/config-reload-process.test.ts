/**
 * Config hot reload of real `svc start` processes (docs/operations.md "Config reload"): the
 * config file is edited, then reloaded by SIGHUP, by `svc reload --url` (admin
 * `svc_reloadConfig`, whose answer says what changed) and by `svc reload --pid`; a file that
 * does not validate is refused with `svc validate`'s messages while the old config serves; with
 * `server.workers: 2` every worker takes the new config, whichever way the reload came.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { request } from 'undici';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';
import { waitFor } from '../helpers/svc.ts';

const run = promisify(execFile);
const SECRET = 'reload-admin-secret';

/** The config file's content: project main with the given upstreams, admin behind a secret. */
function config(upstreams: Array<{ id: string; endpoint: string }>, server: object = {}): object {
  return {
    logLevel: 'info',
    server: { waitBeforeShutdown: '0s', waitAfterShutdown: '0s', ...server },
    admin: { auth: { strategies: [{ type: 'secret', secret: { value: SECRET } }] } },
    projects: [
      { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams: upstreams.map((u) => ({ ...u, evm: { chainId: 31337 } })) },
    ],
  };
}

describe('e2e: config reload of svc start processes', function () {
  this.timeout(90_000);
  let a: AnvilHandle;
  let b: AnvilHandle;
  let dir: string;
  let svc: SvcProcess | undefined;

  before(async () => {
    await ensureBuilt();
    [a, b] = await Promise.all([startAnvil(), startAnvil()]);
    dir = mkdtempSync(join(tmpdir(), 'svc-reload-'));
  });
  afterEach(async () => {
    await svc?.stop();
    svc = undefined;
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  /** The file spawnSvc wrote for `name` (rewritten by the test to change the config). */
  const file = (name: string) => join(dir, `${name}.json`);

  async function admin(s: SvcProcess, method: string): Promise<{ result?: any; error?: { message: string } }> {
    const r = await request(`${s.url}/admin`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-svc-secret-token': SECRET },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method }),
    });
    return (await r.body.json()) as { result?: any; error?: { message: string } };
  }

  /** The upstream ids of main's network, as svc_taxonomy shows them. */
  async function upstreamIds(s: SvcProcess): Promise<string[]> {
    const t = await admin(s, 'svc_taxonomy');
    return (t.result.projects[0].networks[0]?.upstreams ?? []).map((u: { id: string }) => u.id);
  }

  /** Calls until stopped; resolves with the failures. */
  function load(s: SvcProcess): () => Promise<{ failures: string[]; calls: number }> {
    let stop = false;
    const failures: string[] = [];
    let calls = 0;
    const loop = (async () => {
      while (!stop) {
        const r = await request(`${s.url}/main/evm/31337`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', 'latest'] }),
        }).then(
          async (res) => ({ status: res.statusCode, body: (await res.body.json()) as { error?: unknown } }),
          (e: unknown) => ({ status: 0, body: { error: String(e) } }),
        );
        calls++;
        if (r.status !== 200 || r.body.error !== undefined) failures.push(JSON.stringify(r.body.error));
      }
    })();
    return async () => {
      stop = true;
      await loop;
      return { failures, calls };
    };
  }

  it('SIGHUP, svc reload --url and --pid apply an edited file under load; a broken file is refused and the old config serves', async () => {
    svc = await spawnSvc(dir, 'one', config([{ id: 'a', endpoint: a.url }]));
    const stop = load(svc);
    expect(await upstreamIds(svc)).to.deep.equal(['a']);

    // SIGHUP: add b.
    writeFileSync(
      file('one'),
      JSON.stringify(
        config([
          { id: 'a', endpoint: a.url },
          { id: 'b', endpoint: b.url },
        ]),
      ),
    );
    process.kill(svc.pid, 'SIGHUP');
    await waitFor(async () => (await upstreamIds(svc!)).join() === 'a,b', 10_000);
    await waitFor(() => svc!.logs().includes('config reloaded'), 5000);

    // svc reload --url: remove a; the answer says what changed.
    writeFileSync(file('one'), JSON.stringify(config([{ id: 'b', endpoint: b.url }])));
    const out = await run(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), 'reload', '--url', svc.url, '--token', SECRET]);
    const report = JSON.parse(out.stdout) as { upstreams: { removed: string[]; kept: number } };
    expect(report.upstreams.removed).to.deep.equal(['main/a']);
    expect(report.upstreams.kept).to.equal(1);
    expect(await upstreamIds(svc)).to.deep.equal(['b']);

    // A broken file: refused with svc validate's messages, nothing changes.
    writeFileSync(file('one'), JSON.stringify({ projects: [{ id: 'main', upstreams: [{ id: 'b', endpoint: 42 }] }] }));
    const refused = await admin(svc, 'svc_reloadConfig');
    expect(refused.error?.message).to.contain('config refused').and.contain('endpoint');
    const cli = await run(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), 'reload', '--url', svc.url, '--token', SECRET]).then(
      () => 0,
      (e: { code?: number }) => e.code,
    );
    expect(cli).to.equal(1);
    process.kill(svc.pid, 'SIGHUP');
    await waitFor(() => svc!.logs().includes('config reload refused'), 10_000).catch((e: Error) => {
      throw new Error(`${e.message}: ${svc!.logs().slice(-3000)}`);
    });
    expect(await upstreamIds(svc)).to.deep.equal(['b']);

    // svc reload --pid: a back.
    writeFileSync(
      file('one'),
      JSON.stringify(
        config([
          { id: 'a', endpoint: a.url },
          { id: 'b', endpoint: b.url },
        ]),
      ),
    );
    await run(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), 'reload', '--pid', String(svc.pid)]);
    await waitFor(async () => (await upstreamIds(svc!)).join() === 'a,b', 10_000).catch((e: Error) => {
      throw new Error(`${e.message}: ${svc!.logs().slice(-3000)}`);
    });

    const { failures, calls } = await stop();
    expect(failures, failures.slice(0, 3).join('\n')).to.deep.equal([]);
    expect(calls).to.be.greaterThan(10);
  });

  it('with two workers, SIGHUP to the primary and svc_reloadConfig through one worker reach every worker', async () => {
    const server = { workers: 2 };
    svc = await spawnSvc(dir, 'workers', config([{ id: 'a', endpoint: a.url }], server));
    /** The upstream lists every worker answers with (connections spread over the workers). */
    const seen = async (): Promise<Set<string>> => {
      const out = new Set<string>();
      for (let i = 0; i < 12; i++) out.add((await upstreamIds(svc!)).join());
      return out;
    };
    writeFileSync(
      file('workers'),
      JSON.stringify(
        config(
          [
            { id: 'a', endpoint: a.url },
            { id: 'b', endpoint: b.url },
          ],
          server,
        ),
      ),
    );
    process.kill(svc.pid, 'SIGHUP');
    await waitFor(async () => [...(await seen())].join('|') === 'a,b', 15_000);

    writeFileSync(file('workers'), JSON.stringify(config([{ id: 'b', endpoint: b.url }], server)));
    const r = await admin(svc, 'svc_reloadConfig');
    expect(r.result.upstreams.removed).to.deep.equal(['main/a']);
    await waitFor(async () => [...(await seen())].join('|') === 'b', 15_000);
  });
});

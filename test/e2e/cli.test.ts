/**
 * The `svc` command as users run it: `node bin/svc.js` (what `npx svc` and
 * `npm start` run) in a fresh working directory — validate, start with no config, start with
 * ENDPOINT arguments in front of a real anvil node, and a clean exit on SIGTERM. `bin/svc.js`
 * runs the compiled CLI (dist/bin/svc.js), built first when dist/ is missing or stale.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { freePort, listenOnLoopback } from '../helpers/ports.ts';
import { waitFor } from '../helpers/svc.ts';

const BIN = join(PACKAGE_ROOT, 'bin', 'svc.js');

interface Run {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exit: Promise<number | null>;
}

/** The local endpoints catalog every spawned svc reads (zero-config never reaches the internet in tests). */
let catalogUrl = '';

function run(args: string[], cwd: string): Run {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, SVC_COMMIT: 'cli-test', SVC_PUBLIC_REPOSITORY_URL: catalogUrl, SVC_HYPER_ROOT_DOMAIN: 'hyper.invalid' },
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out: () => out, err: () => err, exit };
}

/** Stops a server without its drain window: SIGTERM starts the drain, the second signal exits at once (spec §3.2). */
function stopNow(r: Run): void {
  r.child.kill('SIGTERM');
  setTimeout(() => r.child.kill('SIGTERM'), 50);
}

async function post(
  url: string,
  body: string,
): Promise<{ status: number; json: { result?: unknown; error?: { code: number; data?: { code?: string } } }; headers: Headers }> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: r.status, json: (await r.json()) as never, headers: r.headers };
}

describe('e2e: the svc command', function () {
  this.timeout(30_000);
  let dir: string;
  let anvil: AnvilHandle;
  let catalog: Server | undefined;
  before(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'svc-cli-'));
    anvil = await startAnvil({ chainId: 31337 });
    catalog = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ '31337': { endpoints: [anvil.url] } }));
    });
    catalogUrl = `http://127.0.0.1:${await listenOnLoopback(catalog, 'catalog')}/`;
  });
  after(async () => {
    catalog?.close();
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('--version prints the package version', async () => {
    const r = run(['--version'], dir);
    expect(await r.exit).to.equal(0);
    expect(r.out().trim()).to.match(/^\d+\.\d+\.\d+/);
  });

  it('validate prints ok and exits 0 for a good config', async () => {
    writeFileSync(join(dir, 'good.yaml'), 'projects:\n  - id: main\n    upstreams:\n      - endpoint: http://127.0.0.1:8545\n        evm: { chainId: 1 }\n');
    const r = run(['validate', '--config', 'good.yaml'], dir);
    expect(await r.exit).to.equal(0);
    expect(r.out().trim()).to.equal('ok');
  });

  it('a TypeScript config named on the command line loads through tsx when tsx is installed (here: a devDependency)', async () => {
    writeFileSync(
      join(dir, 'svc.config.ts'),
      'const chainId: number = 1;\nexport default { projects: [{ id: "main", upstreams: [{ endpoint: "http://127.0.0.1:8545", evm: { chainId } }] }] } as const;\n',
    );
    const r = run(['validate', '--config', 'svc.config.ts'], dir);
    expect(await r.exit, r.err()).to.equal(0);
    expect(r.out().trim()).to.equal('ok');
  });

  it('validate prints every problem with its path and exits 1', async () => {
    writeFileSync(join(dir, 'bad.yaml'), 'server:\n  httpPort: nope\n  bogus: 1\nprojects:\n  - id: main\n    upstreams:\n      - endpoint: ftp://x\n');
    const r = run(['validate', '--config', 'bad.yaml'], dir);
    expect(await r.exit).to.equal(1);
    const err = r.err();
    expect(err).to.include('server.httpPort');
    expect(err).to.include('server.bogus: unknown key "bogus"');
    expect(err).to.include('projects[0].upstreams[0].endpoint');
  });

  it('start with no config is zero-config on project main: a chain the catalog lists is served, another answers 404 ErrNetworkNotSupported within 5 s; SIGTERM starts the drain (healthcheck 503), a second signal exits at once', async () => {
    const port = await freePort();
    const r = run(['start', '--port', String(port), '--metrics-port', '0'], dir);
    try {
      await waitFor(
        async () =>
          fetch(`http://127.0.0.1:${port}/`).then(
            () => true,
            () => false,
          ),
        20_000,
      );
      const served = await post(
        `http://127.0.0.1:${port}/evm/31337`,
        '{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}',
      );
      expect(served.json.result).to.match(/^0x[0-9a-f]+$/);
      expect(served.headers.get('x-svc-upstream')).to.match(/^public-evm:31337-http:\/\/127\.0\.0\.1:\d+#redacted=[0-9a-f]{5}$/);
      const started = Date.now();
      // A chain neither the catalog nor hyper's list knows (hyper's live probe fails DNS at once).
      const res = await post(`http://127.0.0.1:${port}/evm/999999`, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}');
      expect(Date.now() - started).to.be.below(5000);
      expect(res.status).to.equal(404);
      expect(res.json.error?.data?.code).to.equal('ErrNetworkNotSupported');
      expect(res.headers.get('x-svc-commit')).to.equal('cli-test');
      r.child.kill('SIGTERM');
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthcheck`)).status === 503, 5000);
    } finally {
      r.child.kill('SIGTERM');
    }
    expect(await r.exit).to.equal(1);
    expect(r.out()).to.include('project main ready');
    expect(r.out()).to.include('second signal: exiting now');
  });

  it('start with ENDPOINT arguments: the live one is probed and serves /evm/<chainId>; a dead one never serves', async () => {
    const port = await freePort();
    const dead = `http://127.0.0.1:${await freePort()}`;
    const r = run(['start', '--port', String(port), '--metrics-port', '0', dead, anvil.url], dir);
    try {
      const url = `http://127.0.0.1:${port}/evm/31337`;
      await waitFor(
        async () => (await post(url, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}').catch(() => undefined))?.json.result !== undefined,
        20_000,
      );
      const res = await post(url, '{"jsonrpc":"2.0","id":1,"method":"net_version"}');
      expect(res.json.result).to.equal('31337');
      // The dead endpoint has no configured chain id, so it never joined the network.
      expect(res.headers.get('x-svc-upstreams')).to.match(/^127\.0\.0\.1:\d+=primary:success:\d+:won$/);
      expect(res.headers.get('x-svc-upstream')).to.equal(new URL(anvil.url).host);
    } finally {
      stopNow(r);
    }
    await r.exit;
  });

  it('healthcheck probes the port the config names (server.httpPort, ${VAR} expanded): 0 while svc serves it, 1 once it stops', async () => {
    const port = await freePort();
    const config = join(dir, 'health.yaml');
    writeFileSync(
      config,
      [
        'server:',
        '  httpPort: ${HEALTH_PORT}',
        '  waitBeforeShutdown: 0s',
        'projects:',
        '  - id: main',
        `    upstreams: [{ endpoint: "${anvil.url}" }]`,
        '',
      ].join('\n'),
    );
    const probe = (args: string[]) => {
      const c = spawn(process.execPath, [BIN, 'healthcheck', ...args], { cwd: dir, stdio: 'ignore', env: { ...process.env, HEALTH_PORT: String(port) } });
      return new Promise<number | null>((resolve) => c.once('exit', resolve));
    };
    expect(await probe(['--config', config]), 'nothing listens yet').to.equal(1);
    const child = spawn(process.execPath, [BIN, 'start', '--config', config, '--metrics-port', '0'], {
      cwd: dir,
      stdio: 'ignore',
      env: { ...process.env, HEALTH_PORT: String(port), SVC_COMMIT: 'cli-test' },
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await waitFor(async () => (await probe(['--config', config])) === 0, 20_000);
      // --port wins over the config: nothing listens on the other port.
      expect(await probe(['--config', config, '--port', String(await freePort())])).to.equal(1);
    } finally {
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGTERM'), 50);
    }
    await exited;
    expect(await probe(['--config', config]), 'stopped').to.equal(1);
  });

  it('start --preset minimal forwards without diagnostic headers', async () => {
    const port = await freePort();
    const r = run(['start', '--port', String(port), '--metrics-port', '0', '--preset', 'minimal', anvil.url], dir);
    try {
      const url = `http://127.0.0.1:${port}/evm/31337`;
      await waitFor(
        async () => (await post(url, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}').catch(() => undefined))?.json.result !== undefined,
        20_000,
      );
      const res = await post(url, '{"jsonrpc":"2.0","id":7,"method":"eth_chainId"}');
      expect(res.json.result).to.equal('0x7a69');
      expect(res.headers.get('x-svc-upstream-attempts')).to.equal(null);
    } finally {
      stopNow(r);
    }
    await r.exit;
  });

  it('a port already in use is reported and exits 1, not a stack dump', async () => {
    const port = await freePort();
    const first = run(['start', '--port', String(port), '--metrics-port', '0'], dir);
    try {
      await waitFor(
        async () =>
          fetch(`http://127.0.0.1:${port}/`).then(
            () => true,
            () => false,
          ),
        20_000,
      );
      const second = run(['start', '--port', String(port), '--metrics-port', '0'], dir);
      expect(await second.exit).to.equal(1);
      expect(second.out() + second.err()).to.include('svc could not start');
    } finally {
      stopNow(first);
    }
    await first.exit;
  });

  it('unknown commands and bad flags exit 2 with usage', async () => {
    const r = run(['frobnicate'], dir);
    expect(await r.exit).to.equal(2);
    expect(r.err()).to.include('unknown command');
    const p = run(['start', '--port', 'x'], dir);
    expect(await p.exit).to.equal(2);
  });
});

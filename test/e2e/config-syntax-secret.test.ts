/**
 * A YAML syntax error names its line and column, never the line itself (docs/configuration.md
 * "Validation"): the yaml library's code excerpt would print whatever the broken line holds, a
 * secret included. Checked on every output that reports it: `svc validate`, the admin
 * `svc_reloadConfig` answer and the `config reload refused` log line of a running `svc start`.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { syntaxErrorPlace } from '../../config/load.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { freePort } from '../helpers/ports.ts';
import { waitFor } from '../helpers/svc.ts';

const BIN = join(PACKAGE_ROOT, 'bin', 'svc.js');
const ADMIN = 'syntax-admin-secret';
/** The secret on the broken line: in no output. */
const SECRET = 'rotated-Sekret-9f27c1';

/** A valid YAML config: admin behind ADMIN, one upstream. */
const good = (endpoint: string) => `logLevel: info
server:
  waitBeforeShutdown: 0s
  waitAfterShutdown: 0s
admin:
  auth:
    strategies:
      - type: secret
        secret:
          value: ${ADMIN}
projects:
  - id: main
    upstreams:
      - id: a
        endpoint: ${endpoint}
        evm:
          chainId: 31337
`;

/** The same config, rotating the admin secret on a line that does not parse (a nested mapping in a compact one). */
const broken = (endpoint: string) => good(endpoint).replace(`value: ${ADMIN}`, `value: ${SECRET}: oops`);

describe('e2e: a YAML syntax error reports its place, never its line', function () {
  this.timeout(60_000);
  let dir: string;
  let anvil: AnvilHandle;
  let child: ChildProcess | undefined;

  before(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'svc-yaml-syntax-'));
    anvil = await startAnvil({ chainId: 31337 });
  });
  after(async () => {
    if (child && child.exitCode === null) {
      const gone = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      setTimeout(() => child?.kill('SIGTERM'), 50);
      await gone;
    }
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('unit: the place is the line and column (and the library code), nothing of the text', () => {
    let place: string | undefined;
    try {
      JSON.parse('{"a": "x", Sekret}');
    } catch (e) {
      place = syntaxErrorPlace(e);
    }
    expect(place)
      .to.match(/^JSON syntax error/)
      .and.not.contain('Sekret');
  });

  it('svc validate, svc_reloadConfig and the "config reload refused" log line name line 10, column 18 and not the secret', async () => {
    const file = join(dir, 'svc.yaml');
    writeFileSync(file, broken(anvil.url));
    const validate = spawn(process.execPath, [BIN, 'validate', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let vOut = '';
    validate.stdout?.on('data', (d: Buffer) => (vOut += d.toString()));
    validate.stderr?.on('data', (d: Buffer) => (vOut += d.toString()));
    const code = await new Promise<number | null>((r) => validate.once('exit', r));
    expect(code).to.equal(1);
    expect(vOut).to.contain('line 10, column 18').and.not.contain(SECRET);

    writeFileSync(file, good(anvil.url));
    const port = await freePort();
    child = spawn(process.execPath, [BIN, 'start', '--config', file, '--port', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let logs = '';
    child.stdout?.on('data', (d: Buffer) => (logs += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (logs += d.toString()));
    const url = `http://127.0.0.1:${port}`;
    await waitFor(
      async () =>
        child?.exitCode !== null ||
        (await fetch(`${url}/`).then(
          () => true,
          () => false,
        )),
      20_000,
    );
    expect(child.exitCode, logs).to.equal(null);

    writeFileSync(file, broken(anvil.url));
    const r = await fetch(`${url}/admin`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-svc-secret-token': ADMIN },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'svc_reloadConfig' }),
    });
    const answer = await r.text();
    expect(answer).to.contain('line 10, column 18').and.not.contain(SECRET);

    process.kill(child.pid as number, 'SIGHUP');
    await waitFor(() => logs.includes('config reload refused'), 10_000);
    const refused = logs.split('\n').filter((l) => l.includes('config reload refused'));
    expect(refused.join('\n')).to.contain('line 10, column 18');
    expect(logs).to.not.contain(SECRET);
  });
});

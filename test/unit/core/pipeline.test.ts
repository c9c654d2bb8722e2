/**
 * The pipeline as data (core/pipeline/pipeline.ts): docs/architecture.md draws the same stages in the same
 * order; a network's wrapper chains are recorded as composed (only taps that wrapped, outermost
 * first), and `svc pipeline` prints every stage with those taps for a real config and preset.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { SyncWaterfallHook } from 'tapable';
import { composeRecorded, PIPELINE, renderPipeline } from '../../../core/pipeline/pipeline.ts';
import { createProxy } from '../../../core/host/create.ts';
import { createLogger } from '../../../lib/logger.ts';
import { PACKAGE_ROOT } from '../../../core/wire/version.ts';
import { resolvePreset } from '../../../presets/index.ts';

describe('the request pipeline (docs/architecture.md "Request lifecycle")', () => {
  it('docs/architecture.md lists the stages of core/pipeline/pipeline.ts, in the same order, in its list and its diagram', () => {
    const doc = readFileSync(join(PACKAGE_ROOT, 'docs', 'architecture.md'), 'utf8');
    const listed = /^Stages: (.+)\.$/m.exec(doc)?.[1]?.split(', ');
    expect(listed).to.deep.equal(PIPELINE.map((s) => s.name));
    const diagram = [...doc.matchAll(/^\s+(\d+) (\w+)\s/gm)].filter((m) => Number(m[1]) >= 1 && Number(m[1]) <= PIPELINE.length);
    const first = diagram.slice(0, PIPELINE.length);
    expect(first.map((m) => m[2])).to.deep.equal(PIPELINE.map((s) => s.name));
    expect(first.map((m) => Number(m[1]))).to.deep.equal(PIPELINE.map((_, i) => i + 1));
  });

  it('composes a wrapper chain as tapable does and records only the taps that wrapped, outermost first', () => {
    type H = (x: string) => string;
    const hook = new SyncWaterfallHook<[H, string]>(['h', 'n']);
    hook.tap({ name: 'inner', stage: 100 }, (h) => (x) => `inner(${h(x)})`);
    hook.tap({ name: 'skipped', stage: 200 }, (h) => h);
    hook.tap({ name: 'outer', stage: 300 }, (h, n) => (x) => `outer-${n}(${h(x)})`);
    const base: H = (x) => x;
    const recorded = composeRecorded(hook, base, 'net');
    expect(recorded.wrappers).to.deep.equal(['outer', 'inner']);
    expect(recorded.handler('v')).to.equal('outer-net(inner(v))');
    expect(hook.call(base, 'net')('v')).to.equal(recorded.handler('v'));
  });

  it('renders every stage of a built network with the taps its preset runs', async () => {
    const { preset } = await resolvePreset('default');
    const proxy = createProxy({
      config: {
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
            upstreams: ['a', 'b'].map((id) => ({ id, endpoint: 'http://127.0.0.1:9/', evm: { chainId: 31337, statePollerInterval: '1h' } })),
          },
        ],
      },
      plugins: preset(),
      logger: createLogger('silent'),
    });
    try {
      proxy.buildRegistry();
      const network = proxy.projects.get('main')!.networks.get('evm:31337')!;
      expect(network.pipeline.call).to.include.members(['multiplex', 'cache']);
      expect(network.pipeline.call.indexOf('multiplex'), 'multiplexing wraps the cache').to.be.below(network.pipeline.call.indexOf('cache'));
      const text = renderPipeline(proxy, 'evm:31337');
      const rows = text.split('\n').filter((l) => /^\s+\d+ /.test(l));
      expect(rows.map((l) => l.trim().split(/\s+/)[1])).to.deep.equal(PIPELINE.map((s) => s.name));
      expect(text).to.include(`call          ${network.pipeline.call.join(' > ')}`);
      expect(text).to.match(/^\s+b: /m);
      expect(renderPipeline(proxy, 'evm:1')).to.equal('');
    } finally {
      await proxy.close();
    }
  });

  it('`svc pipeline --config FILE --network ID` prints the pipeline; an unknown network exits 1', function () {
    this.timeout(60_000);
    const dir = mkdtempSync(join(tmpdir(), 'svc-pipeline-'));
    try {
      const file = join(dir, 'svc.yaml');
      writeFileSync(file, 'projects:\n  - id: main\n    upstreams:\n      - id: a\n        endpoint: http://127.0.0.1:9/\n        evm: { chainId: 31337 }\n');
      const cli = (args: string[]) =>
        execFileSync(
          process.execPath,
          ['--import', 'tsx', '--conditions=svc-source', join(PACKAGE_ROOT, 'bin', 'svc.ts'), 'pipeline', '--config', file, ...args],
          { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
        );
      const out = cli(['--network', 'evm:31337']);
      expect(out.split('\n')[0]).to.equal('project main, network evm:31337');
      expect(out).to.match(/^\s+8 upstream\s+a: /m);
      let code = 0;
      try {
        cli(['--network', 'evm:5']);
      } catch (e) {
        code = (e as { status: number }).status;
      }
      expect(code).to.equal(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

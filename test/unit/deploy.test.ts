/**
 * The deployment files (deploy/kubernetes/, Dockerfile): what can be checked without an image
 * registry or a cluster. The manifests parse; their probe paths, ports and drain numbers agree
 * with svc's own config defaults (read from the schema, not copied) and with the spec §3.2 rule
 * `waitBeforeShutdown >= readiness periodSeconds x failureThreshold + 1s`; the ConfigMap's
 * svc.yaml passes the same validation as `svc validate`; everything runs as a non-root user; the
 * Dockerfile's stages use the Node major of package.json `engines` and copy what `npm pack`
 * ships. Building and running the image is not tested here (docs/operations.md "Deploying").
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { expect } from 'chai';
import semver from 'semver';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import type { TSchema } from '@sinclair/typebox';
import { CoreConfigSchema } from '../../config/schema.ts';
import { loadConfigObject, parseDuration } from '../../config/load.ts';
import type { SchemaFragment } from '../../config/schema.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { defaultPreset } from '../../presets/default.ts';
import { ensureBuilt } from '../helpers/build.ts';

const K8S = join(PACKAGE_ROOT, 'deploy', 'kubernetes');

// Parsed manifests: untyped YAML, navigated by the assertions below.
type Obj = Record<string, any>;

/** Every document of every manifest file, by `kind/name`. */
function manifests(): Map<string, Obj> {
  const out = new Map<string, Obj>();
  for (const f of readdirSync(K8S).filter((x) => x.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(readFileSync(join(K8S, f), 'utf8'))) {
      expect(doc.errors, `${f} parses`).to.deep.equal([]);
      const o = doc.toJS() as Obj;
      out.set(`${o.kind}/${o.metadata?.name ?? ''}`, o);
    }
  }
  return out;
}

/** The schema default of a core config key, e.g. `server.waitBeforeShutdown`. */
function coreDefault(...path: string[]): unknown {
  let s = CoreConfigSchema as TSchema;
  for (const p of path) s = (s as unknown as { properties: Record<string, TSchema> }).properties[p] as TSchema;
  return (s as { default?: unknown }).default;
}

const ENV = { ETH_RPC_PRIMARY: 'https://eth.example.com/v2/key', ETH_RPC_FALLBACK: 'https://eth-2.example.com' };

describe('deployment files', () => {
  const all = manifests();
  const deployment = all.get('Deployment/svc') as Obj;
  const pod = deployment.spec.template.spec as Obj;
  const container = (pod.containers as Obj[]).find((c) => c.name === 'svc') as Obj;
  const portOf = (name: string): number => (container.ports as Obj[]).find((p) => p.name === name)?.containerPort as number;
  const configMap = all.get('ConfigMap/svc-config') as Obj;
  const svcYaml = configMap.data['svc.yaml'] as string;
  const fragments = defaultPreset().flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));

  it('has a Deployment, a Service, a ConfigMap and a Redis with its Service, all listed in kustomization.yaml', () => {
    for (const k of ['Deployment/svc', 'Service/svc', 'ConfigMap/svc-config', 'Deployment/svc-redis', 'Service/svc-redis'])
      expect(all.has(k), k).to.equal(true);
    const kustomization = parseYaml(readFileSync(join(K8S, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
    const files = readdirSync(K8S).filter((x) => x.endsWith('.yaml') && x !== 'kustomization.yaml');
    expect([...kustomization.resources].sort()).to.deep.equal(files.sort());
  });

  it('the ConfigMap svc.yaml passes svc validate (default preset) and the Deployment provides its ${VAR}s', () => {
    const { config } = loadConfigObject(parseYaml(svcYaml), { fragments, env: ENV });
    expect(config.warnings).to.deep.equal([]);
    const provided = new Set((container.env as Obj[]).map((e) => e.name as string));
    for (const [, name] of svcYaml.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)) expect(provided.has(name as string), `env ${name}`).to.equal(true);
    // The shared cache tier points at the Redis Service of redis.yaml.
    const redisPort = (all.get('Service/svc-redis') as Obj).spec.ports[0].port as number;
    expect(svcYaml).to.include(`redis://svc-redis:${redisPort}/`);
  });

  it('probes GET /healthcheck on svc.yaml httpPort, which is the schema default, and the metrics port matches metrics.port', () => {
    const { config } = loadConfigObject(parseYaml(svcYaml), { fragments, env: ENV });
    expect(config.server.httpPort).to.equal(coreDefault('server', 'httpPort'));
    expect(portOf('http')).to.equal(config.server.httpPort);
    expect(config.metrics.port).to.equal(coreDefault('metrics', 'port'));
    expect(portOf('metrics')).to.equal(config.metrics.port);
    for (const probe of [container.readinessProbe, container.livenessProbe] as Obj[]) expect(probe.httpGet.port).to.equal('http');
    expect((container.readinessProbe as Obj).httpGet.path).to.equal('/healthcheck');
    // Liveness reads the path docs/http-interface.md recommends for it, not the readiness path.
    const doc = readFileSync(join(PACKAGE_ROOT, 'docs', 'http-interface.md'), 'utf8');
    const recommended = /livenessProbe:\n\s+httpGet: \{ path: (\S+), port: \d+ \}/.exec(doc)?.[1];
    expect(recommended).to.match(/^\/healthcheck\?eval=/);
    expect((container.livenessProbe as Obj).httpGet.path).to.equal(recommended);
    const service = all.get('Service/svc') as Obj;
    for (const p of service.spec.ports as Obj[]) expect(portOf(p.targetPort as string), `Service targetPort ${p.targetPort}`).to.be.a('number');
    expect(service.spec.selector).to.deep.equal(deployment.spec.selector.matchLabels);
  });

  it('drain numbers agree with waitBeforeShutdown/waitAfterShutdown (schema defaults) and spec §3.2', () => {
    const before = parseDuration(coreDefault('server', 'waitBeforeShutdown') as string) / 1000;
    const after = parseDuration(coreDefault('server', 'waitAfterShutdown') as string) / 1000;
    const { config } = loadConfigObject(parseYaml(svcYaml), { fragments, env: ENV });
    expect(config.server.waitBeforeShutdownMs / 1000, 'svc.yaml keeps the default').to.equal(before);
    expect(config.server.waitAfterShutdownMs / 1000, 'svc.yaml keeps the default').to.equal(after);
    const r = container.readinessProbe as Obj;
    // spec §3.2: waitBeforeShutdown >= readiness periodSeconds x failureThreshold + 1s.
    expect(r.periodSeconds * r.failureThreshold + 1).to.be.at.most(before);
    // The kubelet must not SIGKILL a pod still draining.
    expect(pod.terminationGracePeriodSeconds).to.be.at.least(before + after);
    // Liveness must not restart a draining pod (/healthcheck is 503 for the whole drain).
    const l = container.livenessProbe as Obj;
    expect(l.periodSeconds * l.failureThreshold).to.be.greaterThan(before + after);
  });

  it('a PodDisruptionBudget keeps a pod of the Deployment serving through voluntary disruptions', () => {
    const pdb = all.get('PodDisruptionBudget/svc') as Obj;
    expect(pdb.apiVersion).to.equal('policy/v1');
    expect(pdb.spec.selector.matchLabels).to.deep.equal(deployment.spec.selector.matchLabels);
    expect(pdb.spec.minAvailable).to.be.at.least(1).and.below(deployment.spec.replicas);
  });

  it('the example fallback upstream is held back as one (tag tier:fallback); the primary is not', () => {
    const { config } = loadConfigObject(parseYaml(svcYaml), { fragments, env: ENV });
    const ups = config.projects[0]?.upstreams ?? [];
    expect(ups.find((u) => u.id === 'fallback')?.tags).to.include('tier:fallback');
    expect(ups.find((u) => u.id === 'primary')?.tags ?? []).to.not.include('tier:fallback');
  });

  it('the kustomization points at a docs section that exists', () => {
    const text = readFileSync(join(K8S, 'kustomization.yaml'), 'utf8');
    const [, file, heading] = /see (docs\/[\w.-]+\.md) "([^"]+)"/.exec(text) ?? [];
    expect(file, 'a docs pointer').to.be.a('string');
    expect(readFileSync(join(PACKAGE_ROOT, file as string), 'utf8')).to.match(new RegExp(`^#+ ${heading}$`, 'm'));
  });

  it("Prometheus's Kubernetes job keeps the Deployment's pods and scrapes their annotated metrics port and path", () => {
    const job = (parseYaml(readFileSync(join(PACKAGE_ROOT, 'deploy', 'prometheus', 'kubernetes-scrape.yml'), 'utf8')) as Obj).scrape_configs[0] as Obj;
    const annotations = deployment.spec.template.metadata.annotations as Record<string, string>;
    const labels = deployment.spec.template.metadata.labels as Record<string, string>;
    // A pod as Prometheus's pod discovery sees it (container port http), relabelled as Prometheus does: anchored regexes.
    const meta: Record<string, string> = {
      __address__: '10.1.2.3:4000',
      __meta_kubernetes_pod_label_app_kubernetes_io_name: labels['app.kubernetes.io/name'] as string,
      __meta_kubernetes_pod_annotation_prometheus_io_scrape: annotations['prometheus.io/scrape'] as string,
      __meta_kubernetes_pod_annotation_prometheus_io_port: annotations['prometheus.io/port'] as string,
      __meta_kubernetes_pod_annotation_prometheus_io_path: annotations['prometheus.io/path'] as string,
      __meta_kubernetes_namespace: 'default',
      __meta_kubernetes_pod_name: 'svc-abc',
    };
    for (const r of job.relabel_configs as Obj[]) {
      const value = (r.source_labels as string[]).map((l) => meta[l] ?? '').join(r.separator ?? ';');
      const m = new RegExp(`^(?:${r.regex ?? '(.*)'})$`).exec(value);
      if ((r.action ?? 'replace') === 'keep') {
        expect(m, `kept by ${r.source_labels}`).to.not.equal(null);
        continue;
      }
      if (m) meta[r.target_label] = (r.replacement ?? '$1').replace(/\$(\d)/g, (_: string, i: string) => m[Number(i)] ?? '');
    }
    expect(meta.__address__).to.equal(`10.1.2.3:${portOf('metrics')}`);
    expect(meta.__metrics_path__).to.equal('/metrics');
    expect(meta).to.include({ namespace: 'default', pod: 'svc-abc' });
  });

  it('mounts the ConfigMap where --config points', () => {
    const args = container.args as string[];
    const file = args[args.indexOf('--config') + 1] as string;
    const mount = (container.volumeMounts as Obj[]).find((m) => file.startsWith(`${m.mountPath}/`)) as Obj;
    const volume = (pod.volumes as Obj[]).find((v) => v.name === mount.name) as Obj;
    expect(volume.configMap.name).to.equal('svc-config');
    expect(file.slice(mount.mountPath.length + 1)).to.equal('svc.yaml');
  });

  it('every pod runs as non-root without privilege escalation', () => {
    for (const name of ['Deployment/svc', 'Deployment/svc-redis']) {
      const spec = (all.get(name) as Obj).spec.template.spec as Obj;
      expect(spec.securityContext.runAsNonRoot, name).to.equal(true);
      expect(spec.securityContext.runAsUser, name).to.be.greaterThan(0);
      for (const c of spec.containers as Obj[]) {
        expect(c.securityContext.allowPrivilegeEscalation, `${name} ${c.name}`).to.equal(false);
        expect(c.securityContext.capabilities.drop, `${name} ${c.name}`).to.include('ALL');
      }
    }
  });
});

describe('Dockerfile', () => {
  const text = readFileSync(join(PACKAGE_ROOT, 'Dockerfile'), 'utf8');
  const lines = text.split('\n').filter((l) => l.trim() && !l.trim().startsWith('#'));
  const stages = text.split(/^FROM /m).slice(1);
  const runtime = stages[stages.length - 1] as string;
  const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
    name: string;
    engines: { node: string };
    dependencies: Record<string, string>;
  };

  it('is multi-stage and every stage uses the Node major of package.json engines', () => {
    const major = semver.minVersion(pkg.engines.node)?.major;
    const froms = lines.filter((l) => l.startsWith('FROM '));
    expect(froms.length).to.be.at.least(2);
    for (const f of froms) expect(f, f).to.match(new RegExp(`^FROM node:${major}[-.\\s]`));
  });

  it('the runtime stage installs production dependencies only, runs as non-root, starts `svc start` and checks /healthcheck', () => {
    expect(runtime).to.match(/RUN npm ci --omit=dev\b/);
    const user = /^USER\s+(\S+)/m.exec(runtime)?.[1];
    expect(user).to.be.a('string');
    expect(['root', '0']).to.not.include(user);
    expect(runtime.indexOf('USER ')).to.be.lessThan(runtime.indexOf('ENTRYPOINT'));
    const entry = JSON.parse(/^ENTRYPOINT\s+(\[.*\])$/m.exec(runtime)?.[1] ?? '[]') as string[];
    expect(entry).to.deep.equal(['node', 'bin/svc.js', 'start']);
    // The probe follows the config's port: `svc healthcheck` on the config file CMD passes to start.
    const cmd = JSON.parse(/^CMD\s+(\[.*\])$/m.exec(runtime)?.[1] ?? '[]') as string[];
    const healthcheck = JSON.parse(/^\s+CMD\s+(\[.*\])$/m.exec(runtime.slice(runtime.indexOf('HEALTHCHECK')))?.[1] ?? '[]') as string[];
    expect(healthcheck).to.deep.equal(['node', 'bin/svc.js', 'healthcheck', '--config', cmd[cmd.indexOf('--config') + 1]]);
    expect(runtime).to.match(new RegExp(`EXPOSE ${coreDefault('server', 'httpPort')} ${coreDefault('metrics', 'port')}`));
  });

  it('the runtime stage copies what `npm pack` ships (dist/ and bin/svc.js)', async function () {
    this.timeout(120_000); // a first build when dist/ is stale; otherwise ~1 s
    await ensureBuilt();
    const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: PACKAGE_ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const files = ((JSON.parse(out) as { files: { path: string }[] }[])[0]?.files ?? []).map((f) => f.path);
    expect(files).to.include.members(['bin/svc.js', 'dist/bin/svc.js', 'dist/core/host/proxy.js', 'dist/package.json', 'package.json']);
    expect(runtime).to.match(/^COPY --from=build \/src\/dist \.\/dist$/m);
    for (const f of files.filter((x) => !x.startsWith('dist/') && x !== 'README.md')) {
      expect(runtime, `runtime stage copies ${f}`).to.match(new RegExp(`^COPY .*\\b${f.replace(/[.]/g, '\\.')}\\b`, 'm'));
    }
  });

  it('the compiled code imports only production dependencies (what `npm ci --omit=dev` installs)', async function () {
    this.timeout(120_000); // a first build when dist/ is stale
    await ensureBuilt();
    const used = new Set<string>();
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.name.endsWith('.js')) {
          // Static imports and re-exports (a statement starting the line, as tsc writes them) and literal dynamic imports; bin/svc.js's optional tsx is resolved, not imported by name.
          for (const m of readFileSync(p, 'utf8').matchAll(
            /(?:^(?:import|export)\b[^'"\n;]*?\bfrom\s*|\bimport\s*\(\s*|^import\s+)['"]([^'"./][^'"]*)['"]/gm,
          )) {
            const spec = m[1] as string;
            if (isBuiltin(spec)) continue;
            if (spec.startsWith(`${pkg.name}/`)) continue; // self-reference (dist/package.json exports)
            used.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] as string));
          }
        }
      }
    };
    walk(join(PACKAGE_ROOT, 'dist'));
    expect(used.size).to.be.greaterThan(5);
    const missing = [...used].filter((name) => !(name in pkg.dependencies));
    expect(missing, 'imported by dist/ but not in dependencies').to.deep.equal([]);
  });
});

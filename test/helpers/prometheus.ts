/**
 * Starts a real Prometheus server (Debian's `prometheus` package) for end-to-end tests of the
 * dashboard and alert rules in deploy/. Installs nothing: when `prometheus` or `promtool` is
 * missing it throws naming the exact command (`.ci/run` installs the package).
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './ports.ts';

const run = promisify(execFile);
const INSTALL_HINT = 'Prometheus is missing: run `apt-get install -y --no-install-recommends prometheus` (Debian package; `.ci/run` installs it)';

/** One sample of an instant-query answer: labels and `[unix seconds, value as text]`. */
export interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

/** A Prometheus alert as `/api/v1/alerts` lists it. */
export interface PromAlert {
  labels: Record<string, string>;
  /** Annotations as rendered by Prometheus's templates. */
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  value: string;
}

/** A running Prometheus. */
export interface PrometheusHandle {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /**
   * Runs an instant query through `/api/v1/query`.
   * @throws Error carrying Prometheus's `errorType: error` when the expression does not parse or evaluate
   */
  query(expr: string): Promise<PromSample[]>;
  /** The active (pending or firing) alerts, from `/api/v1/alerts`. */
  alerts(): Promise<PromAlert[]>;
  /**
   * Adds a `host:port` to the scraped targets (config rewritten, then SIGHUP) and resolves once
   * Prometheus lists it among its active targets (at most 10 s).
   * @throws Error when the reloaded config does not list it in time
   */
  addTarget(target: string): Promise<void>;
  /** Kills the server and removes its temp directory. Idempotent. */
  stop(): Promise<void>;
}

/** Options of {@link startPrometheus}. */
export interface StartPrometheusOptions {
  /** `host:port` of the /metrics endpoint to scrape every second. */
  target: string;
  /** Alert rules file text (YAML), loaded and evaluated every second. */
  rules: string;
}

/** Prometheus's config: 1-s scrape and evaluation, one job `svc` scraping `targets`. */
function config(targets: string[]): string {
  const list = targets.map((t) => `'${t}'`).join(', ');
  return [
    'global:',
    '  scrape_interval: 1s',
    '  scrape_timeout: 1s',
    '  evaluation_interval: 1s',
    'rule_files: [rules.yml]',
    'scrape_configs:',
    '  - job_name: svc',
    `    static_configs: [{ targets: [${list}] }]`,
    '',
  ].join('\n');
}

async function which(bin: string): Promise<boolean> {
  try {
    await run(bin, ['--version']);
    return true;
  } catch {
    return false;
  }
}

/**
 * Checks a rules file (`promtool check rules`) or a whole Prometheus config with the rule files
 * it names (`promtool check config`).
 * @param what `rules` or `config`
 * @returns promtool's output
 * @throws Error with promtool's output when the file does not pass, or when promtool is missing
 */
export async function promtoolCheck(what: 'rules' | 'config', file: string): Promise<string> {
  if (!(await which('promtool'))) throw new Error(INSTALL_HINT);
  try {
    const { stdout, stderr } = await run('promtool', ['check', what, file]);
    return stdout + stderr;
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string };
    throw new Error(`promtool check ${what} ${file} failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  }
}

/**
 * Starts Prometheus on a free loopback port with a temp config (scrape and evaluation interval
 * 1 s, one job `svc`) and waits until it is ready (`/-/ready`, at most 10 s).
 * @throws Error when the binary is missing or the server does not become ready
 */
export async function startPrometheus(opts: StartPrometheusOptions): Promise<PrometheusHandle> {
  if (!(await which('prometheus'))) throw new Error(INSTALL_HINT);
  const dir = await mkdtemp(join(tmpdir(), 'svc-prom-'));
  await writeFile(join(dir, 'rules.yml'), opts.rules);
  const targets = [opts.target];
  await writeFile(join(dir, 'prometheus.yml'), config(targets));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let log = '';
  const child: ChildProcess = spawn(
    'prometheus',
    [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  child.stderr?.on('data', (d: Buffer) => {
    if (log.length < 20_000) log += d.toString();
  });
  const onExit = () => child.kill('SIGKILL');
  process.once('exit', onExit);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.off('exit', onExit);
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/-/ready`)).ok) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`Prometheus did not become ready:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const api = async (path: string): Promise<any> => {
    const body = (await (await fetch(`${url}${path}`)).json()) as { status: string; data: any; errorType?: string; error?: string };
    if (body.status !== 'success') throw new Error(`Prometheus ${path}: ${body.errorType}: ${body.error}`);
    return body.data;
  };
  return {
    url,
    query: async (expr) => (await api(`/api/v1/query?query=${encodeURIComponent(expr)}`)).result as PromSample[],
    alerts: async () => (await api('/api/v1/alerts')).alerts as PromAlert[],
    addTarget: async (target) => {
      targets.push(target);
      await writeFile(join(dir, 'prometheus.yml'), config(targets));
      child.kill('SIGHUP');
      const until = Date.now() + 10_000;
      for (;;) {
        const active = (await api('/api/v1/targets?state=active')).activeTargets as { labels: { instance?: string } }[];
        if (active.some((t) => t.labels.instance === target)) return;
        if (Date.now() > until) throw new Error(`Prometheus did not pick up target ${target} after a reload:\n${log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stop,
  };
}

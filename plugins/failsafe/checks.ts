/**
 * Start-up checks of the failsafe plugin's config that the schema cannot express (run by the
 * `configured` hook, so `svc validate` reports them with their paths): the rules eRPC's
 * `AdaptiveDuration.validate` applies to adaptive timeouts and hedges, and keys that have no
 * effect where they are written. No hooks here.
 */
import type { ResolvedConfig } from 'svc-proxy/plugin';
import { ConfigError } from 'svc-proxy/plugin/errors';
import type { FailsafeEntry } from './schema.ts';

/** One problem, with its config path. */
interface Problem {
  path: string;
  message: string;
}

/** The entries of a configured `failsafe` value with their paths (one object is one entry). */
function entriesOf(raw: unknown, base: string): Array<{ e: FailsafeEntry; path: string }> {
  if (raw === undefined || raw === null) return [];
  if (Array.isArray(raw)) return raw.map((e, i) => ({ e: e as FailsafeEntry, path: `${base}[${i}]` }));
  return [{ e: raw as FailsafeEntry, path: base }];
}

/** Problems and warnings of one entry. */
function checkEntry(e: FailsafeEntry, path: string, scope: 'network' | 'upstream', problems: Problem[], warnings: Set<string>): void {
  const t = e.timeout;
  if (t) {
    const q = t.quantile ?? 0;
    if (q > 0 && !t.duration && !t.maxDuration) {
      problems.push({
        path: `${path}.timeout`,
        message:
          'an adaptive timeout (quantile) needs duration or maxDuration: without one the first calls, before any latency sample, would have no deadline (eRPC refuses it too)',
      });
    }
    if (q <= 0 && !t.duration)
      problems.push({ path: `${path}.timeout`, message: 'timeout sets no duration: give duration, or quantile with duration or maxDuration' });
    if (t.minDuration && t.maxDuration && t.minDuration > t.maxDuration)
      problems.push({ path: `${path}.timeout.minDuration`, message: 'minDuration is larger than maxDuration' });
    if (q <= 0 && t.duration && (t.minDuration !== undefined || t.maxDuration !== undefined)) {
      warnings.add(`${path}.timeout: minDuration/maxDuration only bound an adaptive timeout (quantile > 0); the static duration is used as it is`);
    }
  }
  const h = e.hedge;
  if (h && h.quantile !== undefined && h.quantile > 0 && h.minDelay > h.maxDelay)
    problems.push({ path: `${path}.hedge.minDelay`, message: 'minDelay is larger than maxDelay' });
  if (scope === 'upstream' && e.retry?.emptyResultDelay !== undefined) {
    problems.push({
      path: `${path}.retry.emptyResultDelay`,
      message:
        'emptyResultDelay paces network-scope retries only (eRPC ignores it on upstreams): move it to networks[].failsafe[].retry or networkDefaults.failsafe[].retry',
    });
  }
}

/**
 * Checks every network and upstream `failsafe` of a resolved config; adds warnings to
 * `c.warnings` (each once, even when `*Defaults` repeat it on every network).
 * @throws ConfigError naming each problem's path: an adaptive timeout without `duration` or
 *   `maxDuration`, a timeout with no duration, a floor above its ceiling, or `emptyResultDelay`
 *   at upstream scope
 */
export function checkFailsafe(c: ResolvedConfig): void {
  const problems: Problem[] = [];
  const warnings = new Set<string>();
  c.projects.forEach((p, pi) => {
    p.networks.forEach((n, ni) => {
      for (const { e, path } of entriesOf(n.settings.failsafe, `projects[${pi}].networks[${ni}].failsafe`)) checkEntry(e, path, 'network', problems, warnings);
    });
    p.upstreams.forEach((u, ui) => {
      for (const { e, path } of entriesOf(u.settings.failsafe, `projects[${pi}].upstreams[${ui}].failsafe`))
        checkEntry(e, path, 'upstream', problems, warnings);
    });
  });
  if (problems.length) throw new ConfigError(problems);
  for (const w of warnings) c.warnings.push(w);
}

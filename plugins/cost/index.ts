/**
 * cost plugin (spec §4.5 cost headers, §2.9 `server.costHeaders`). Taps
 * `responseHeaders` only, and only when `server.costHeaders` is true: it reads the calls'
 * execution records (their upstream attempts), so a call pays nothing for it.
 *
 * - `X-SVC-Calls`: routed calls in the response. `X-SVC-Billable`: those that succeeded (empty
 *   answers and cache hits included) or ended in an execution revert; protocol, transport,
 *   rate-limit and cancellation failures are not billable. `X-SVC-Methods`: distinct methods,
 *   sorted, comma-joined.
 * - `X-SVC-Credits`: `<vendor>:<method>=<units>` segments, sorted, `;`-joined, summed over every
 *   request sent to an upstream (timed-out ones included; skipped and breaker-open attempts
 *   were never sent and cost 0; multiplexed followers and cache hits send none). Units come from
 *   the vendor's price table (a plugin registers one with the `cost` service; svc ships none, so
 *   no table without a cited public source), else the generating provider's
 *   `settings.creditUnits` (method glob to units, `{"*": 0}` opts out), else a flat 1.
 *   `X-SVC-Credits-Total` and `X-SVC-Credits-Version` come with it; all three are absent when
 *   nothing accrued. The version is the one of the price table that priced the credits (a
 *   table's optional `version`), else svc's version (provider `creditUnits`, the flat rate, a
 *   table without one); several distinct versions in one response are sorted and comma-joined.
 * - No cost header on early errors that routed no call.
 */
import {
  type AttemptRecord,
  type ExecutionRecord,
  type HeaderSink,
  definePlugin,
  type Plugin,
  type PluginHost,
  type SchemaFragment,
  settingsOf,
  type Upstream,
  Type,
} from 'svc-proxy/plugin';
import { COST_SERVICE, type PriceTable } from './api.ts';
import { PROVIDER_ORIGIN } from 'svc-proxy/plugins/providers';
import { compileGlobs } from 'svc-proxy/util';

// The service's key and types are the contract in svc-proxy/plugin; re-exported for svc-proxy/presets' older import path.
export { COST_SERVICE, type CostService, type PriceTable } from './api.ts';

/** What a table's version may hold: it is sent in a header and comma-joined with others. */
const VERSION_TOKEN = /^[A-Za-z0-9._~:+@/-]{1,64}$/;

/** Most distinct methods (and credit segments) listed in a header; more are counted in a `-Truncated` header. */
export const MAX_COST_SEGMENTS = 64;

/** Errors a client is still billed for: the node executed the call (spec §4.5). */
const BILLABLE_ERRORS: ReadonlySet<string> = new Set(['ErrEndpointExecutionException']);

const costSchema = {
  server: {
    costHeaders: Type.Optional(
      Type.Boolean({ default: false, description: 'spec §4.5: X-SVC-Calls, -Billable, -Methods, -Credits, -Credits-Total, -Credits-Version on proxy answers' }),
    ),
  },
} satisfies SchemaFragment;

/** A compiled `creditUnits` map: exact method names first, then globs in order, `*` last. */
function compileCreditUnits(raw: unknown): PriceTable | undefined {
  if (!raw || typeof raw !== 'object') return undefined;
  const entries = Object.entries(raw as Record<string, unknown>).filter((e): e is [string, number] => typeof e[1] === 'number' && e[1] >= 0);
  const exact = new Map(entries.filter(([k]) => !/[*?]/.test(k)));
  const globs = entries.filter(([k]) => /[*?]/.test(k) && k !== '*').map(([k, v]) => [compileGlobs(k), v] as const);
  const star = entries.find(([k]) => k === '*')?.[1];
  return (m) => exact.get(m) ?? globs.find(([g]) => g(m))?.[1] ?? star;
}

function joinCapped(items: readonly string[], sep: string, sink: HeaderSink, name: string): void {
  sink.set(name, items.slice(0, MAX_COST_SEGMENTS).join(sep));
  if (items.length > MAX_COST_SEGMENTS) sink.set(`${name}-Truncated`, String(items.length - MAX_COST_SEGMENTS));
}

/**
 * Creates the cost plugin (name `cost`).
 * @returns a plugin owning `server.costHeaders`, providing the `cost` service
 */
export function costPlugin(): Plugin {
  return definePlugin({
    name: 'cost',
    provides: [COST_SERVICE],
    schema: costSchema,
    apply(host: PluginHost) {
      const tables = new Map<string, { units: PriceTable; version: string }>();
      const creditUnits = new WeakMap<object, PriceTable | undefined>();
      let on = false;
      host.services.provide(COST_SERVICE, {
        quoteCredits: (network, method) => {
          let most = 0;
          for (const u of network.upstreams) most = Math.max(most, unitsFor(u.vendor, u, method));
          return network.upstreams.length === 0 ? 1 : most;
        },
        registerPriceTable: (vendor, table) => {
          if (typeof table !== 'function') throw new TypeError(`cost: the price table of vendor "${vendor}" is not a function`);
          const version = table.version;
          if (version !== undefined && (typeof version !== 'string' || !VERSION_TOKEN.test(version))) {
            throw new TypeError(
              `cost: the price table of vendor "${vendor}" has an invalid version ${JSON.stringify(version)} (1-64 characters of A-Z a-z 0-9 . _ ~ : + @ / -)`,
            );
          }
          tables.set(vendor, { units: table, version: version ?? host.version });
        },
      });
      host.hooks.configured.tap('cost', (c) => {
        on = settingsOf(c.server, costSchema.server).costHeaders === true;
      });

      /** The version of the table that priced the last {@link unitsFor} call (svc's when none did). */
      let pricedBy = host.version;
      /** Units of one request to `u` (of `vendor`) for `method` (spec §4.5 precedence); sets {@link pricedBy}. */
      const unitsFor = (vendor: string, u: Upstream | undefined, method: string): number => {
        const table = tables.get(vendor);
        const priced = table?.units(method);
        if (priced !== undefined) {
          pricedBy = table!.version;
          return priced;
        }
        pricedBy = host.version;
        if (u) {
          if (!creditUnits.has(u)) creditUnits.set(u, compileCreditUnits(PROVIDER_ORIGIN.get(u)?.settings.creditUnits));
          const own = creditUnits.get(u)?.(method);
          if (own !== undefined) return own;
        }
        return 1;
      };
      const unitsOf = (a: AttemptRecord): number => unitsFor(a.vendor, host.projects.get(a.projectId)?.upstreams.get(a.upstreamId), a.method);

      host.hooks.responseHeaders.tap('cost', (sink: HeaderSink, records: readonly ExecutionRecord[]) => {
        if (!on) return;
        const routed = records.filter((r) => r.routed);
        if (routed.length === 0) return;
        let billable = 0;
        const methods = new Set<string>();
        const credits = new Map<string, number>();
        const versions = new Set<string>();
        for (const r of routed) {
          methods.add(r.method);
          if (!r.error || BILLABLE_ERRORS.has(r.error.name)) billable++;
          for (const a of r.attempts) {
            if (!a.dialled) continue;
            const key = `${a.vendor}:${a.method}`;
            const units = unitsOf(a);
            if (units > 0) versions.add(pricedBy);
            credits.set(key, (credits.get(key) ?? 0) + units);
          }
        }
        sink.set('X-SVC-Calls', String(routed.length));
        sink.set('X-SVC-Billable', String(billable));
        joinCapped([...methods].sort(), ',', sink, 'X-SVC-Methods');
        let total = 0;
        const segments: string[] = [];
        for (const [k, v] of [...credits].sort((x, y) => (x[0] < y[0] ? -1 : 1))) {
          if (v <= 0) continue;
          total += v;
          segments.push(`${k}=${v}`);
        }
        if (total <= 0) return;
        joinCapped(segments, ';', sink, 'X-SVC-Credits');
        sink.set('X-SVC-Credits-Total', String(total));
        sink.set('X-SVC-Credits-Version', versions.size === 1 ? versions.values().next().value! : [...versions].sort().join(','));
      });
    },
  });
}

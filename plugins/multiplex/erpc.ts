/**
 * eRPC's object form of `multiplexing` (`multiplexing: {enabled: true}`, shown in eRPC's
 * "how it works" docs; eRPC's config type is a plain boolean) rewritten into svc's boolean at
 * load time (the plugin's `SchemaFragment.normalize`). An object with other keys is a problem:
 * svc's multiplexing has no settings beyond on/off.
 */
import { eachNetwork, isConfigObject, pathOf, rewriteKey, type ConfigDocument, type NormalizeReport } from 'svc-proxy/plugin';

/** `networks[].multiplexing` / `networkDefaults.multiplexing` as `{enabled}` → the boolean. */
export function normalizeMultiplexing(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => {
    const m = n.multiplexing;
    if (!isConfigObject(m)) return;
    const at = pathOf(path, 'multiplexing');
    const extra = Object.keys(m).filter((k) => k !== 'enabled');
    if (extra.length) return void out.problem(at, `multiplexing takes only on/off in svc (eRPC's {enabled}); remove ${extra.join(', ')}`);
    // eRPC's default is on: `{}` and `{enabled: true}` both mean on.
    rewriteKey(n, 'multiplexing', at, m.enabled !== false && m.enabled !== 'false', out);
  });
}

/** Which requests must go through the router (route matching is per-request cost), from the routes mounted in the `routes` hook. */
import type Router from '@koa/router';

/** What a router serves per HTTP method: `any` path, or a set of static paths (lower-case, no trailing slash). */
export type RoutedPaths = ReadonlyMap<string, 'any' | ReadonlySet<string>>;

/**
 * The paths a router serves per HTTP method, or undefined for every request (a `use` middleware). Static paths (`/admin`) are kept as a
 * set, so a proxy POST skips the router unless a plugin mounted a pattern route for POST. Computed once, before the server starts.
 */
export function routedPaths(router: Router): RoutedPaths | undefined {
  const out = new Map<string, 'any' | Set<string>>();
  for (const layer of router.stack) {
    if (layer.methods.length === 0) return undefined;
    const path = typeof layer.path === 'string' ? layer.path : '';
    const isStatic = path !== '' && layer.paramNames.length === 0 && !/[:*(?]/.test(path);
    for (const m of layer.methods) {
      const cur = out.get(m);
      if (cur === 'any') continue;
      if (!isStatic) out.set(m, 'any');
      else {
        const set = cur ?? new Set<string>();
        set.add(staticKey(path));
        out.set(m, set);
      }
    }
  }
  return out;
}

/** A path as the static-route set holds it: lower-case (the router is case-insensitive), no trailing slash. */
export function staticKey(path: string): string {
  const lower = path.toLowerCase();
  return lower.length > 1 && lower.endsWith('/') ? lower.slice(0, -1) : lower;
}

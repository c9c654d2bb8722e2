/**
 * eRPC's shapes of auth strategies rewritten into svc's at load time (the plugin's
 * `SchemaFragment.normalize`), in every auth block (projects, admin, healthCheck):
 *
 * - `rateLimitBudget` inside the strategy's own block (`secret.rateLimitBudget`,
 *   `network.rateLimitBudget`, `siwe.rateLimitBudget`: eRPC attaches it to the user the strategy
 *   returns) → the strategy's `rateLimitBudget` (svc counts the requests the strategy accepts
 *   against it: the same requests). Both set to different budgets is a problem.
 * - jwt `verificationJwksUrl` → `jwksUrl`; `rateLimitBudgetClaimName` → `rateLimitBudgetClaim`.
 * - network `trustedProxies` (a no-op in eRPC, which never reads it) → removed.
 * - `type: database` with eRPC's `database: {...}` block → svc's API-key strategy
 *   (./erpc-database.ts).
 */
import { normalizeDatabaseStrategy } from './erpc-database.ts';
import { eachAuthBlock, isConfigObject, pathOf, renameKey, type ConfigDocument, type NormalizeReport } from 'svc-proxy/plugin';

/** The auth plugin's `normalize` (see the module comment). */
export function normalizeAuthShapes(doc: ConfigDocument, out: NormalizeReport): void {
  eachAuthBlock(doc, (auth, path) => {
    if (!Array.isArray(auth.strategies)) return;
    auth.strategies.forEach((s, i) => {
      if (!isConfigObject(s) || typeof s.type !== 'string') return;
      const sp = `${path}.strategies[${i}]`;
      if (s.type === 'database') return void normalizeDatabaseStrategy(s, sp, out);
      const block = s[s.type];
      if (!isConfigObject(block)) return;
      const bp = pathOf(sp, s.type);
      if ('rateLimitBudget' in block) {
        const inner = block.rateLimitBudget;
        if (s.rateLimitBudget !== undefined && s.rateLimitBudget !== inner) {
          out.problem(
            pathOf(bp, 'rateLimitBudget'),
            `two budgets for one strategy: "${String(inner)}" here and "${String(s.rateLimitBudget)}" on the strategy; keep the strategy's rateLimitBudget`,
          );
        } else {
          delete block.rateLimitBudget;
          s.rateLimitBudget = inner;
          out.rewrite(pathOf(bp, 'rateLimitBudget'), `${bp}.rateLimitBudget`, `${sp}.rateLimitBudget`);
        }
      }
      if (s.type === 'network' && 'trustedProxies' in block) {
        out.rewrite(
          pathOf(bp, 'trustedProxies'),
          block.trustedProxies,
          "(removed: eRPC's network strategy never reads it; trusted forwarders are `server.trustedIPForwarders`)",
        );
        delete block.trustedProxies;
      }
      if (s.type === 'jwt') {
        renameKey(block, bp, 'verificationJwksUrl', 'jwksUrl', out);
        renameKey(block, bp, 'rateLimitBudgetClaimName', 'rateLimitBudgetClaim', out);
      }
    });
  });
}

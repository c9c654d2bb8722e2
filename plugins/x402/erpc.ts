/**
 * eRPC's `x402` strategy block rewritten into svc's at load (the plugin's `SchemaFragment.normalize`), with a `--print` line:
 * `facilitatorUrl` → `facilitator.url`; `sellerAddress` → `accepts[0].payTo`; `network` (an x402 v1 name such as `base`) →
 * `accepts[0].network` (`eip155:8453`); `asset` (default: the chain's default stablecoin in `@x402/evm`'s table, e.g. USDC) and `extra`
 * (`name`, `version`: the EIP-712 domain; default: the table's) → `accepts[0].asset` and `.eip712`; `scheme`, `maxTimeoutSeconds` →
 * `accepts[0]`; `pricePerRequest` → `price.perCall`; `rateLimitBudget` → the strategy's own; `description` stays. `verifyOnly: true` is refused: svc never serves a payment it
 * does not settle (use a testnet). The `@x402/evm` tables load only when such a block exists.
 */
import { createRequire } from 'node:module';
import { eachAuthBlock, isConfigObject, pathOf, type ConfigDocument, type NormalizeReport } from 'svc-proxy/plugin';

/** Keys only eRPC's shape has. */
const ERPC_KEYS = ['facilitatorUrl', 'sellerAddress', 'pricePerRequest', 'verifyOnly', 'extra', 'asset', 'network', 'scheme', 'maxTimeoutSeconds'];

interface EvmTables {
  EVM_NETWORK_CHAIN_ID_MAP: Record<string, number>;
}
interface AssetTables {
  getDefaultAsset(network: string): { asset: string; name: string; version: string };
}

/** The x402 plugin's `normalize` (see the module comment). */
export function normalizeX402Shapes(doc: ConfigDocument, out: NormalizeReport): void {
  eachAuthBlock(doc, (auth, path) => {
    if (!Array.isArray(auth.strategies)) return;
    auth.strategies.forEach((s, i) => {
      if (!isConfigObject(s) || s.type !== 'x402' || !isConfigObject(s.x402)) return;
      const b = s.x402;
      if (!('facilitatorUrl' in b || 'sellerAddress' in b || 'pricePerRequest' in b)) return;
      const bp = pathOf(`${path}.strategies[${i}]`, 'x402');
      const from = { ...b };
      if (b.verifyOnly === true) {
        out.problem(
          pathOf(bp, 'verifyOnly'),
          'eRPC verifyOnly serves without settling; svc never serves a payment it does not settle: drop it and test on a testnet',
        );
        return;
      }
      const require = createRequire(import.meta.url);
      let chainId: number | undefined;
      if (typeof b.network === 'string') {
        chainId = /^eip155:\d+$/.test(b.network) ? Number(b.network.slice(7)) : (require('@x402/evm/v1') as EvmTables).EVM_NETWORK_CHAIN_ID_MAP[b.network];
        if (chainId === undefined) {
          out.problem(pathOf(bp, 'network'), `"${b.network}" is not an x402 v1 network name; write the chain as eip155:<chainId>`);
          return;
        }
      }
      const network = chainId === undefined ? undefined : `eip155:${chainId}`;
      const extra = isConfigObject(b.extra) ? b.extra : {};
      let asset = b.asset;
      let eip712: Record<string, unknown> | undefined =
        typeof extra.name === 'string' && typeof extra.version === 'string' ? { name: extra.name, version: extra.version } : undefined;
      if (network && (asset === undefined || !eip712)) {
        try {
          const d = (require('@x402/evm') as AssetTables).getDefaultAsset(network);
          asset ??= d.asset;
          if (!eip712 && typeof asset === 'string' && asset.toLowerCase() === d.asset.toLowerCase()) eip712 = { name: d.name, version: d.version };
        } catch {
          // No default stablecoin for this chain: the schema names what is missing.
        }
      }
      const accept: Record<string, unknown> = {};
      if (network !== undefined) accept.network = network;
      if (asset !== undefined) accept.asset = asset;
      if (b.sellerAddress !== undefined) accept.payTo = b.sellerAddress;
      if (eip712) accept.eip712 = eip712;
      if (b.scheme !== undefined) accept.scheme = b.scheme;
      if (b.maxTimeoutSeconds !== undefined) accept.maxTimeoutSeconds = b.maxTimeoutSeconds;
      // eRPC applied its block's budget to the payer: svc's strategies carry the budget beside their block.
      if (b.rateLimitBudget !== undefined) {
        if (s.rateLimitBudget !== undefined && s.rateLimitBudget !== b.rateLimitBudget) {
          out.problem(pathOf(bp, 'rateLimitBudget'), `the strategy already names rateLimitBudget ${JSON.stringify(s.rateLimitBudget)}: keep one`);
          return;
        }
        s.rateLimitBudget = b.rateLimitBudget;
        delete b.rateLimitBudget;
      }
      for (const k of ERPC_KEYS) delete b[k];
      b.accepts = [accept];
      if (from.pricePerRequest !== undefined) b.price = { perCall: from.pricePerRequest };
      if (from.facilitatorUrl !== undefined) b.facilitator = { url: from.facilitatorUrl };
      out.rewrite(bp, from, { ...b });
    });
  });
}

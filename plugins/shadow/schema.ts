/**
 * The `upstreams[].shadow` config (spec §3.1) and the methods a shadow never
 * receives. No hooks here: `index.ts` wires them.
 */
import { type SchemaFragment, Strict, Type } from 'svc-proxy/plugin';
import { compileGlobs, compileIgnorePaths, type GlobTest, type IgnorePaths, STATEFUL_METHODS } from 'svc-proxy/util';

/** Longest `shadow.methods` pattern accepted, characters: a config typo must not compile a huge automaton. */
export const MAX_SHADOW_METHODS_LENGTH = 1024;

/** Most methods `shadow.ignoreFields` may name. */
export const MAX_IGNORE_METHODS = 256;
/** Most paths per method in `shadow.ignoreFields`. */
export const MAX_IGNORE_PATHS = 64;
/** Longest method name or path in `shadow.ignoreFields`, characters. */
export const MAX_IGNORE_PATH_LENGTH = 256;

/** The schema fragment of the shadow plugin: one key, `shadow`, under `upstreams[]` and `upstreamDefaults`. */
export const shadowSchema: SchemaFragment = {
  upstream: {
    shadow: Strict(
      {
        enabled: Type.Optional(
          Type.Boolean({
            default: true,
            description:
              'mirror traffic to this upstream (true once the `shadow` object is present); it never serves a client either way while `shadow` is set and enabled',
          }),
        ),
        sampleRate: Type.Optional(
          Type.Number({ minimum: 0, maximum: 1, default: 1, description: 'share of answered client calls copied to this upstream, 0..1' }),
        ),
        methods: Type.Optional(
          Type.String({
            minLength: 1,
            maxLength: MAX_SHADOW_METHODS_LENGTH,
            default: '*',
            description: 'method globs copied, `|`-separated (`eth_get*|eth_call`); writes are never copied',
          }),
        ),
        ignoreFields: Type.Optional(
          Type.Record(
            Type.String({ minLength: 1, maxLength: MAX_IGNORE_PATH_LENGTH }),
            Type.Array(Type.String({ minLength: 1, maxLength: MAX_IGNORE_PATH_LENGTH, pattern: '^[^.]+(\\.[^.]+)*$' }), { maxItems: MAX_IGNORE_PATHS }),
            {
              maxProperties: MAX_IGNORE_METHODS,
              description:
                "per method name, result fields dropped from both answers before they are compared (eRPC's shadow.ignoreFields): dot-separated paths from the result (`timestamp`, `logs.*.blockTimestamp`), `*` for every array element or object key; a method listed here uses exactly its list instead of the built-in one (the `blockTimestamp` fields of eth_getLogs, eth_getTransactionReceipt, eth_getBlockReceipts)",
            },
          ),
        ),
      },
      {
        description:
          'spec §3.1: a shadow upstream never serves clients; a sampled copy of answered calls is sent to it and compared with the served answer (`svc_shadow_comparison_total`)',
      },
    ),
  },
};

/** An upstream's resolved `shadow` settings (`upstreams[].shadow`, spec §3.1). */
export interface ShadowSettings {
  /** Share of answered client calls copied, 0..1 (1: every call, 0: none). */
  sampleRate: number;
  /** The `methods` pattern as configured (`|`-separated globs). */
  methods: string;
  /** The compiled `methods` test. */
  matches: GlobTest;
  /** `ignoreFields` compiled, by method: replaces the built-in paths of each method it names. */
  ignore: ReadonlyMap<string, IgnorePaths>;
}

/** Compiles an `ignoreFields` map (bounded as the schema bounds it; anything else is skipped). */
function ignoreFieldsOf(raw: unknown): ReadonlyMap<string, IgnorePaths> {
  const out = new Map<string, IgnorePaths>();
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return out;
  for (const [method, paths] of Object.entries(raw).slice(0, MAX_IGNORE_METHODS)) {
    if (!Array.isArray(paths)) continue;
    const list = paths.filter((p): p is string => typeof p === 'string' && p.length <= MAX_IGNORE_PATH_LENGTH).slice(0, MAX_IGNORE_PATHS);
    out.set(method, compileIgnorePaths(list));
  }
  return out;
}

/**
 * The shadow settings of one upstream entry, defaults applied, or undefined when the upstream
 * is not a shadow (no `shadow` key, or `enabled: false`). Accepts the resolved
 * `u.config.settings.shadow` and the raw `upstreamDefaults.shadow` alike.
 * @param raw the value of the entry's `shadow` key
 */
export function shadowSettingsOf(raw: unknown): ShadowSettings | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const o = raw as { enabled?: unknown; sampleRate?: unknown; methods?: unknown; ignoreFields?: unknown };
  if (o.enabled === false) return undefined;
  const rate = typeof o.sampleRate === 'number' && Number.isFinite(o.sampleRate) ? Math.min(1, Math.max(0, o.sampleRate)) : 1;
  const methods = typeof o.methods === 'string' && o.methods.trim() !== '' ? o.methods.slice(0, MAX_SHADOW_METHODS_LENGTH) : '*';
  const globs = methods
    .split('|')
    .map((g) => g.trim())
    .filter((g) => g !== '');
  return { sampleRate: rate, methods, matches: compileGlobs(globs.length ? globs : ['*']), ignore: ignoreFieldsOf(o.ignoreFields) };
}

/**
 * Methods that change state or open server-side state: a copy would broadcast a transaction a
 * second time, sign with a node's keys, move a dev chain, or install a filter nobody uninstalls.
 */
const NEVER_MIRRORED_METHODS: ReadonlySet<string> = new Set([
  'eth_sendRawTransaction',
  'eth_sendRawTransactionConditional',
  'eth_sendRawTransactionSync',
  'eth_sendTransaction',
  'eth_sendBundle',
  'eth_callBundle',
  'eth_sendPrivateTransaction',
  'eth_sendPrivateRawTransaction',
  'eth_cancelPrivateTransaction',
  'eth_sendUserOperation',
  'eth_sign',
  'eth_signTransaction',
  'eth_signTypedData',
  'eth_signTypedData_v3',
  'eth_signTypedData_v4',
  'eth_subscribe',
  'eth_unsubscribe',
  'eth_submitWork',
  'eth_submitHashrate',
  'debug_setHead',
]);

/** Method prefixes of node administration and dev-chain control (anvil, hardhat, ganache): never copied. */
const NEVER_MIRRORED_PREFIXES: readonly string[] = ['personal_', 'admin_', 'miner_', 'anvil_', 'hardhat_', 'evm_', 'ganache_', 'clique_', 'engine_'];

/**
 * True when a method may be copied to a shadow upstream: not a write, a signature, a
 * subscription, a stateful filter method (spec §2.8) or node administration.
 * @param method the JSON-RPC method name
 */
export function mirrorable(method: string): boolean {
  if (NEVER_MIRRORED_METHODS.has(method) || STATEFUL_METHODS.has(method)) return false;
  for (const p of NEVER_MIRRORED_PREFIXES) if (method.startsWith(p)) return false;
  return true;
}

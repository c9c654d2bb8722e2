/**
 * contract-rules plugin: which contracts and functions a caller may reach. A project or network
 * (`contractRules`, also in `networkDefaults`) lists rules, each for some callers (`users`, globs
 * on the caller's user id: an API key's user, a strategy's) and methods, with allow and deny lists
 * of contract addresses and 4-byte function selectors. Checked for:
 *
 * - calls (`eth_call`, `eth_estimateGas`, `eth_createAccessList`, `trace_call`, `debug_traceCall`):
 *   the call object's `to` and the selector of its `input` (or `data`; both set and different is
 *   refused); a call with state or block overrides is refused, since an override could run other
 *   code at an allowed address;
 * - signed transactions (`eth_sendRawTransaction` and its `Sync`, `Conditional` and private
 *   forms, `eth_sendPrivateTransaction`'s `tx`, every transaction of an `eth_sendBundle`): `to` and
 *   selector decoded with viem's `parseTransaction` (loaded on the first such check); bytes that do
 *   not decode are refused;
 * - filters: every `address` of `eth_getLogs` and of `eth_newFilter` (a filter's polls,
 *   `eth_getFilterChanges` and `eth_getFilterLogs`, read that filter's logs, so it is checked
 *   when made: one family, a rule naming either method checks both), every `toAddress` of
 *   `trace_filter` (selectors do not apply).
 *
 * Methods that reach contracts in ways no rule can check ({@link UNCHECKED_METHODS}: simulations of
 * several calls, account-abstraction operations, unsigned sends) are refused for a caller any rule
 * applies to.
 *
 * A call breaking a rule gets `ErrContractRuleRefused` (-32602, HTTP 200) naming the rule and what
 * broke it, and costs no upstream call: the `call` tap sits outside multiplexing and the cache, so
 * every caller is checked on its own and a refused call never shares an answer. A contract
 * creation (no `to`), a filter without `address` and a call without a selector break an allow
 * list (they are not in it). A network with no rule gets its handler back unchanged.
 */
import { Type } from '@sinclair/typebox';
import { type CallContext, type CallHandler, CallStage, definePlugin, type Network, type Plugin, type PluginHost, stageBetween } from 'svc-proxy/plugin';
import { SvcError } from 'svc-proxy/plugin/errors';
import { compileGlobs, type GlobTest } from 'svc-proxy/util';

/** Methods whose param 0 is a call object (`to`, `data`/`input`); extra params (state or block overrides) cannot be checked. */
const CALL_METHODS = ['eth_call', 'eth_estimateGas', 'eth_createAccessList', 'trace_call', 'debug_traceCall'];
/** Methods whose param 0 is one signed transaction. */
const RAW_TX_METHODS = ['eth_sendRawTransaction', 'eth_sendRawTransactionSync', 'eth_sendRawTransactionConditional', 'eth_sendPrivateRawTransaction'];
/** Methods whose param 0 carries signed transactions: `{tx}` (a private transaction), `{txs: [...]}` (a bundle). */
const WRAPPED_TX_METHODS = ['eth_sendPrivateTransaction', 'eth_sendBundle'];
/**
 * Filters naming the contracts they read: `address` (logs: `eth_getLogs`, and `eth_newFilter`,
 * whose polls read that filter's logs), `toAddress` (traces).
 */
const FILTER_METHODS = ['eth_getLogs', 'eth_newFilter', 'trace_filter'];
/** Log filters, one family: a rule on one covers the other (a filter's polls read what `eth_getLogs` would). */
const LOG_FAMILY = ['eth_getLogs', 'eth_newFilter'];

/** The methods whose contracts (and selectors) a rule checks. */
export const RULE_METHODS: readonly string[] = [...CALL_METHODS, ...RAW_TX_METHODS, ...WRAPPED_TX_METHODS, ...FILTER_METHODS];

/**
 * Methods that reach contracts in ways a rule cannot check (several calls with overrides, account
 * abstraction, unsigned sends): refused for a caller any rule applies to.
 */
export const UNCHECKED_METHODS: readonly string[] = [
  'eth_simulateV1',
  'eth_callMany',
  'eth_callBundle',
  'trace_callMany',
  'debug_traceCallMany',
  'trace_rawTransaction',
  'mev_sendBundle',
  'mev_simBundle',
  'eth_sendUserOperation',
  'eth_estimateUserOperationGas',
  'eth_sendTransaction',
];

/** A call refused by a contract rule. -32602, HTTP 200: a fact about the call, retried nowhere, charged to no upstream. */
export class ErrContractRuleRefused extends SvcError {
  static override readonly defaultCode = -32602;
}

const ADDRESS = '^0x[0-9a-fA-F]{40}$';
const SELECTOR = '^0x[0-9a-fA-F]{8}$';

const RuleSchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'named in refusals (default: the rule’s position)' })),
    methods: Type.Optional(
      Type.Array(Type.Union(RULE_METHODS.map((m) => Type.Literal(m))), {
        minItems: 1,
        description:
          'methods checked (default every method whose contract svc can check: calls, signed transactions and bundles, eth_getLogs and eth_newFilter, trace_filter)',
      }),
    ),
    users: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 256 }), {
        maxItems: 64,
        description: 'callers the rule applies to: globs on the user id (default every caller)',
      }),
    ),
    allowContracts: Type.Optional(
      Type.Array(Type.String({ pattern: ADDRESS }), { maxItems: 10_000, description: 'only these contract addresses may be called' }),
    ),
    denyContracts: Type.Optional(
      Type.Array(Type.String({ pattern: ADDRESS }), { maxItems: 10_000, description: 'these contract addresses may not be called' }),
    ),
    allowSelectors: Type.Optional(
      Type.Array(Type.String({ pattern: SELECTOR }), { maxItems: 10_000, description: 'only these 4-byte function selectors may be called' }),
    ),
    denySelectors: Type.Optional(
      Type.Array(Type.String({ pattern: SELECTOR }), { maxItems: 10_000, description: 'these 4-byte function selectors may not be called' }),
    ),
  },
  { additionalProperties: false },
);

const rulesSchema = {
  contractRules: Type.Optional(
    Type.Array(RuleSchema, { maxItems: 64, description: 'contract and function selector rules checked before a call is served (contract-rules plugin)' }),
  ),
};

/** A rule compiled for matching. */
interface Rule {
  label: string;
  methods: ReadonlySet<string>;
  users?: GlobTest;
  allowContracts?: ReadonlySet<string>;
  denyContracts?: ReadonlySet<string>;
  allowSelectors?: ReadonlySet<string>;
  denySelectors?: ReadonlySet<string>;
}

type RuleInput = {
  name?: string;
  methods?: string[];
  users?: string[];
  allowContracts?: string[];
  denyContracts?: string[];
  allowSelectors?: string[];
  denySelectors?: string[];
};

const lower = (list: string[] | undefined) => (list ? new Set(list.map((x) => x.toLowerCase())) : undefined);

/** Signed-transaction methods, one family: a rule on one of them covers every way to send a transaction. */
const TX_FAMILY = [...RAW_TX_METHODS, ...WRAPPED_TX_METHODS];

/**
 * A rule's methods with their families: any signed-transaction method brings all of them, and
 * `eth_call` brings the other calls that execute a call object (`trace_call`, `debug_traceCall`),
 * and `eth_getLogs` and `eth_newFilter` bring each other (a filter's polls read its logs), so naming the common method is never a way around the rule.
 */
function expandMethods(methods: readonly string[]): ReadonlySet<string> {
  const out = new Set(methods);
  if (methods.some((m) => TX_FAMILY.includes(m))) for (const m of TX_FAMILY) out.add(m);
  if (out.has('eth_call')) for (const m of ['trace_call', 'debug_traceCall']) out.add(m);
  if (methods.some((m) => LOG_FAMILY.includes(m))) for (const m of LOG_FAMILY) out.add(m);
  return out;
}

function compileRules(raw: unknown, where: string): Rule[] {
  if (!Array.isArray(raw)) return [];
  return (raw as RuleInput[]).map((r, i) => ({
    label: `"${r.name ?? `${where} contractRules[${i}]`}"`,
    methods: expandMethods(r.methods ?? RULE_METHODS),
    users: r.users ? compileGlobs(r.users) : undefined,
    allowContracts: lower(r.allowContracts),
    denyContracts: lower(r.denyContracts),
    allowSelectors: lower(r.allowSelectors),
    denySelectors: lower(r.denySelectors),
  }));
}

/** What a call reaches: its contract addresses (`undefined` for a creation or a filter of every contract) and selector. */
interface Target {
  contracts: ReadonlyArray<string | undefined>;
  selector?: string;
  /** True for filters: selectors do not apply. */
  filter: boolean;
}

let viemModule: Promise<typeof import('viem')> | undefined;

/** The selector of call data: its first 4 bytes, lower-cased, or undefined when shorter. */
function selectorOf(data: unknown): string | undefined {
  return typeof data === 'string' && /^0x[0-9a-fA-F]{8}/.test(data) ? data.slice(0, 10).toLowerCase() : undefined;
}

const refuse = (method: string, why: string) =>
  new ErrContractRuleRefused(`${method}: ${why}, so the contract rules cannot be checked`, { details: { method } });

/** One signed transaction's target, decoded with viem. */
async function signedTarget(method: string, raw: unknown): Promise<Target> {
  viemModule ??= import('viem');
  const viem = await viemModule;
  try {
    const tx = viem.parseTransaction(raw as `0x${string}`);
    return { contracts: [tx.to ? tx.to.toLowerCase() : undefined], selector: selectorOf(tx.data), filter: false };
  } catch {
    throw refuse(method, 'a signed transaction cannot be decoded');
  }
}

/** Most signed transactions of one bundle checked; a longer bundle is refused. */
const MAX_BUNDLE = 100;

/**
 * What a call reaches: one target, several for a bundle.
 * @throws ErrContractRuleRefused when the call reaches contracts in a way no rule can check
 *   (undecodable bytes, overrides, `data` and `input` that differ, a bundle over 100 transactions)
 */
export async function targetsOf(method: string, params: unknown): Promise<Target[]> {
  const list: unknown[] = Array.isArray(params) ? params : [];
  const p0 = list[0];
  const obj = p0 !== null && typeof p0 === 'object' ? (p0 as Record<string, unknown>) : {};
  if (FILTER_METHODS.includes(method)) {
    const a = method === 'trace_filter' ? obj.toAddress : obj.address;
    const addrs: unknown[] = Array.isArray(a) ? a : typeof a === 'string' ? [a] : [];
    return [{ contracts: addrs.length ? addrs.map((x) => (typeof x === 'string' ? x.toLowerCase() : undefined)) : [undefined], filter: true }];
  }
  if (RAW_TX_METHODS.includes(method)) return [await signedTarget(method, p0)];
  if (method === 'eth_sendPrivateTransaction') return [await signedTarget(method, obj.tx)];
  if (method === 'eth_sendBundle') {
    const txs: unknown[] = Array.isArray(obj.txs) ? obj.txs : [];
    if (txs.length === 0 || txs.length > MAX_BUNDLE) throw refuse(method, `a bundle of ${txs.length} transactions`);
    return Promise.all(txs.map((t) => signedTarget(method, t)));
  }
  // A call object: overrides (state, block, a tracer's) could run other code at an allowed address.
  const tracer = list[2];
  const overridden =
    method === 'debug_traceCall'
      ? tracer !== null && typeof tracer === 'object' && ('stateOverrides' in tracer || 'blockOverrides' in tracer)
      : list.slice(2).some((x) => x !== undefined && x !== null);
  if (overridden) throw refuse(method, 'state or block overrides are set');
  if (obj.data !== undefined && obj.input !== undefined && obj.data !== obj.input) throw refuse(method, '`data` and `input` differ');
  return [{ contracts: [typeof obj.to === 'string' ? obj.to.toLowerCase() : undefined], selector: selectorOf(obj.input ?? obj.data), filter: false }];
}

/** Why a target breaks a rule, or undefined when it passes. */
export function breach(rule: Rule, t: Target): { reason: string; contract?: string; selector?: string } | undefined {
  for (const c of t.contracts) {
    if (rule.allowContracts && (c === undefined || !rule.allowContracts.has(c)))
      return {
        reason: c === undefined ? (t.filter ? 'a filter without an address matches every contract' : 'a contract creation') : 'the contract is not allowed',
        contract: c,
      };
    if (c !== undefined && rule.denyContracts?.has(c)) return { reason: 'the contract is denied', contract: c };
  }
  if (t.filter) return undefined;
  if (rule.allowSelectors && (t.selector === undefined || !rule.allowSelectors.has(t.selector)))
    return { reason: t.selector === undefined ? 'the call names no function selector' : 'the function selector is not allowed', selector: t.selector };
  if (t.selector !== undefined && rule.denySelectors?.has(t.selector)) return { reason: 'the function selector is denied', selector: t.selector };
  return undefined;
}

/**
 * Creates the contract-rules plugin (name `contract-rules`).
 * @returns the plugin: keys `projects[].contractRules` and `networks[].contractRules`, one `call` tap outside multiplexing
 */
export function contractRulesPlugin(): Plugin {
  return definePlugin({
    name: 'contract-rules',
    schema: { project: rulesSchema, network: rulesSchema },
    apply(host: PluginHost) {
      const stage = stageBetween(CallStage.LOCAL_METHODS, CallStage.STATIC_RESPONSES);
      host.hooks.call.tap({ name: 'contract-rules', stage }, (inner: CallHandler, network: Network): CallHandler => {
        const rules = [
          ...compileRules((network.project.config.settings as { contractRules?: unknown }).contractRules, `project ${network.project.id}`),
          ...compileRules((network.config.settings as { contractRules?: unknown }).contractRules, `network ${network.id}`),
        ];
        if (rules.length === 0) return inner;
        const checked = new Set([...rules.flatMap((r) => [...r.methods]), ...UNCHECKED_METHODS]);
        const check = async (ctx: CallContext): Promise<void> => {
          const method = ctx.request.method;
          const user = ctx.identity?.userId ?? '';
          const unchecked = UNCHECKED_METHODS.includes(method);
          let targets: Target[] | undefined;
          for (const r of rules) {
            if (r.users && !r.users(user)) continue;
            if (unchecked)
              throw new ErrContractRuleRefused(
                `${method} refused: contract rule ${r.label} applies to this caller, and ${method} reaches contracts in ways it cannot check`,
                {
                  details: { rule: r.label.slice(1, -1), method },
                },
              );
            if (!r.methods.has(method)) continue;
            targets ??= await targetsOf(method, ctx.request.params);
            for (const t of targets) {
              const b = breach(r, t);
              if (!b) continue;
              throw new ErrContractRuleRefused(
                `${method} refused by contract rule ${r.label}: ${b.reason}${b.contract ? ` (${b.contract})` : ''}${b.selector ? ` (selector ${b.selector})` : ''}`,
                {
                  details: {
                    rule: r.label.slice(1, -1),
                    method,
                    ...(b.contract ? { contract: b.contract } : {}),
                    ...(b.selector ? { selector: b.selector } : {}),
                  },
                },
              );
            }
          }
        };
        return (ctx) => (ctx.internal || !checked.has(ctx.request.method) ? inner(ctx) : check(ctx).then(() => inner(ctx)));
      });
    },
  });
}

/**
 * contract-rules plugin: which contracts and functions a caller may reach. A project or network
 * (`contractRules`, also in `networkDefaults`) lists rules, each for some callers (`users`, globs
 * on the caller's user id: an API key's user, a strategy's) and methods, with allow and deny lists
 * of contract addresses and 4-byte function selectors. Checked for:
 *
 * - `eth_call`, `eth_estimateGas`, `eth_createAccessList`: the call object's `to` and the selector
 *   of its `data` (or `input`);
 * - `eth_sendRawTransaction`: `to` and selector decoded from the signed transaction (viem's
 *   `parseTransaction`, loaded on the first such check);
 * - `eth_getLogs`: every `address` of the filter (selectors do not apply).
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

/** The methods whose target a rule checks. */
export const RULE_METHODS: readonly string[] = ['eth_call', 'eth_estimateGas', 'eth_createAccessList', 'eth_sendRawTransaction', 'eth_getLogs'];

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
      Type.Array(Type.Union(RULE_METHODS.map((m) => Type.Literal(m))), { minItems: 1, description: 'methods checked (default all five)' }),
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

function compileRules(raw: unknown, where: string): Rule[] {
  if (!Array.isArray(raw)) return [];
  return (raw as RuleInput[]).map((r, i) => ({
    label: `"${r.name ?? `${where} contractRules[${i}]`}"`,
    methods: new Set(r.methods ?? RULE_METHODS),
    users: r.users ? compileGlobs(r.users) : undefined,
    allowContracts: lower(r.allowContracts),
    denyContracts: lower(r.denyContracts),
    allowSelectors: lower(r.allowSelectors),
    denySelectors: lower(r.denySelectors),
  }));
}

/** What a call reaches: its contract addresses (`[undefined]` for a creation or a filter of every contract) and selector. */
interface Target {
  contracts: ReadonlyArray<string | undefined>;
  selector?: string;
  /** True for eth_getLogs: selectors do not apply. */
  logs: boolean;
}

let viemModule: Promise<typeof import('viem')> | undefined;

/** The selector of call data: its first 4 bytes, lower-cased, or undefined when shorter. */
function selectorOf(data: unknown): string | undefined {
  return typeof data === 'string' && /^0x[0-9a-fA-F]{8}/.test(data) ? data.slice(0, 10).toLowerCase() : undefined;
}

/**
 * The contracts and selector a call reaches.
 * @throws ErrContractRuleRefused when a signed transaction cannot be decoded (a rule could not be checked)
 */
export async function targetOf(method: string, params: unknown): Promise<Target> {
  const p0 = Array.isArray(params) ? (params[0] as unknown) : undefined;
  if (method === 'eth_getLogs') {
    const a = p0 !== null && typeof p0 === 'object' ? (p0 as { address?: unknown }).address : undefined;
    const list = Array.isArray(a) ? a : typeof a === 'string' ? [a] : [];
    return { contracts: list.length ? list.map((x) => (typeof x === 'string' ? x.toLowerCase() : undefined)) : [undefined], logs: true };
  }
  if (method === 'eth_sendRawTransaction') {
    viemModule ??= import('viem');
    const viem = await viemModule;
    try {
      const tx = viem.parseTransaction(p0 as `0x${string}`);
      return { contracts: [tx.to ? tx.to.toLowerCase() : undefined], selector: selectorOf(tx.data), logs: false };
    } catch {
      throw new ErrContractRuleRefused('eth_sendRawTransaction: the signed transaction cannot be decoded, so the contract rules cannot be checked', {
        details: { method },
      });
    }
  }
  const call = p0 !== null && typeof p0 === 'object' ? (p0 as { to?: unknown; data?: unknown; input?: unknown }) : {};
  return { contracts: [typeof call.to === 'string' ? call.to.toLowerCase() : undefined], selector: selectorOf(call.data ?? call.input), logs: false };
}

/** Why a target breaks a rule, or undefined when it passes. */
export function breach(rule: Rule, t: Target): { reason: string; contract?: string; selector?: string } | undefined {
  for (const c of t.contracts) {
    if (rule.allowContracts && (c === undefined || !rule.allowContracts.has(c)))
      return {
        reason: c === undefined ? (t.logs ? 'a filter without address matches every contract' : 'a contract creation') : 'the contract is not allowed',
        contract: c,
      };
    if (c !== undefined && rule.denyContracts?.has(c)) return { reason: 'the contract is denied', contract: c };
  }
  if (t.logs) return undefined;
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
        const checked = new Set(rules.flatMap((r) => [...r.methods]));
        const check = async (ctx: CallContext): Promise<void> => {
          const method = ctx.request.method;
          const user = ctx.identity?.userId ?? '';
          let target: Target | undefined;
          for (const r of rules) {
            if (!r.methods.has(method) || (r.users && !r.users(user))) continue;
            target ??= await targetOf(method, ctx.request.params);
            const b = breach(r, target);
            if (b) {
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

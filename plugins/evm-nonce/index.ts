/**
 * evm-nonce plugin: nonces that do not go backwards across failover. A wallet asks
 * `eth_getTransactionCount(address, "pending")` before each send; each node answers from its
 * own mempool, so one that has not seen the wallet's last transaction answers a lower count, and
 * a wallet moved to it by a failover reuses a nonce. svc asks up to `maxUpstreams` of the
 * selected upstreams at once (a round of slots, each running retry and hedge on its own
 * upstream) and answers the highest count (dshackle's nonce quorum).
 *
 * - Which calls: `eth_getTransactionCount` at `pending`, the count a node answers from its own
 *   mempool (never cached). `latest` is a count at a block: svc pins it to the network's highest
 *   known block (evm-interpolation) and sends it only to upstreams that have that block
 *   (evm-state), where every node agrees, so it goes to one upstream as any read. Internal
 *   calls, and networks with one candidate, are left alone.
 * - Bounded in time: after the first answer svc waits up to 1 s for a second one (one fast node
 *   alone does not set the count); once two are in, the rest get about as long again as the
 *   round took (at least 20 ms, within that 1 s), then are cancelled, so a dead upstream does not
 *   hold every send. When no slot answers and the selection has more upstreams, they are swept
 *   one by one as for any read.
 * - Bounded in trust: the highest count is used only when it is at most `maxLead` above the next
 *   highest answer; a count further ahead is one upstream's word against the others' (a lying or
 *   broken node must not set every wallet's nonce), so it is dropped, logged and counted, and
 *   the next highest is considered the same way.
 * - Traces: every slot is an attempt with reason `consensus_slot` (spec §4.5); only the slot
 *   whose count was served keeps `:won`.
 * - Metric `svc_network_nonce_rounds_total{project,network,outcome}`: `agreement` (every answer
 *   equal), `highest` (answers differed; the highest served), `outlier_dropped` (a count too far
 *   ahead was not served), `failed` (no slot answered).
 */
import { Type } from '@sinclair/typebox';
import { Counter } from 'prom-client';
import {
  type AttemptHandler,
  AttemptStage,
  type CallContext,
  definePlugin,
  type Leg,
  type Network,
  type Plugin,
  type PluginHost,
  type RpcResult,
  type Upstream,
  UpstreamCursor,
} from 'svc-proxy/plugin';
import { ErrUpstreamsExhausted, type SvcError } from 'svc-proxy/plugin/errors';
import { acquireController, releaseController } from 'svc-proxy/util';

/** Defaults of `networks[].evm.nonceQuorum`. */
export const NONCE_QUORUM_DEFAULTS = { enabled: true, maxUpstreams: 3, maxLead: 16 } as const;

/** Shortest and longest wait for the other slots once one answered, ms. */
const WAIT_MIN_MS = 20;
const WAIT_MAX_MS = 1000;

/** The plugin's key under `networks[].evm` (and `networkDefaults.evm`). */
const networkEvmSchema = {
  nonceQuorum: Type.Object(
    {
      enabled: Type.Optional(
        Type.Boolean({
          default: NONCE_QUORUM_DEFAULTS.enabled,
          description: 'answer eth_getTransactionCount at pending with the highest count among several upstreams',
        }),
      ),
      maxUpstreams: Type.Optional(
        Type.Integer({
          minimum: 2,
          maximum: 16,
          default: NONCE_QUORUM_DEFAULTS.maxUpstreams,
          description: 'upstreams asked at once (the first of the selection order)',
        }),
      ),
      maxLead: Type.Optional(
        Type.Integer({
          minimum: 0,
          default: NONCE_QUORUM_DEFAULTS.maxLead,
          description: 'a count more than this above the next highest answer is not served (one upstream against the others)',
        }),
      ),
    },
    { additionalProperties: false, default: {}, description: 'nonces that do not go backwards across failover (evm-nonce plugin)' },
  ),
};

/** A network's resolved `nonceQuorum`. */
export interface NonceQuorumSettings {
  enabled: boolean;
  /** Upstreams asked at once, at least 2. */
  maxUpstreams: number;
  /** Largest lead of the served count over the next highest answer. */
  maxLead: number;
}

/**
 * Reads a network's `evm.nonceQuorum`, with the defaults for what it lacks.
 * @param network the network
 */
export function nonceQuorumOf(network: Network): NonceQuorumSettings {
  const evm = network.config.settings.evm as Record<string, unknown> | undefined;
  const raw = (evm?.nonceQuorum ?? {}) as Partial<NonceQuorumSettings>;
  return {
    enabled: raw.enabled ?? NONCE_QUORUM_DEFAULTS.enabled,
    maxUpstreams: raw.maxUpstreams ?? NONCE_QUORUM_DEFAULTS.maxUpstreams,
    maxLead: raw.maxLead ?? NONCE_QUORUM_DEFAULTS.maxLead,
  };
}

/** True when the call asks the count a node answers from its own mempool: `eth_getTransactionCount` at `pending`. */
export function asksPendingCount(ctx: CallContext): boolean {
  if (ctx.request.method !== 'eth_getTransactionCount') return false;
  const params = ctx.request.params;
  return Array.isArray(params) && params[1] === 'pending';
}

/** One slot's answer: the upstream, its count (undefined when not a hex quantity) and the result. */
interface Answer {
  upstreamId: string;
  count: bigint | undefined;
  result: RpcResult;
}

/** A JSON-RPC quantity as a bigint, or undefined. */
function quantity(v: unknown): bigint | undefined {
  return typeof v === 'string' && /^0x[0-9a-fA-F]{1,64}$/.test(v) ? BigInt(v) : undefined;
}

/**
 * The answer to serve: the highest count within `maxLead` of the next highest (a count further
 * ahead is dropped and the next one considered), else the first answer when none is a quantity.
 * @returns the answer and how many counts were dropped as too far ahead
 */
export function pickHighest(answers: readonly Answer[], maxLead: number): { answer: Answer; dropped: number } | undefined {
  const counted = answers.filter((a) => a.count !== undefined).sort((a, b) => (a.count! < b.count! ? 1 : a.count! > b.count! ? -1 : 0));
  let dropped = 0;
  for (let i = 0; i < counted.length; i++) {
    const next = counted[i + 1];
    if (!next || (counted[i]!.count as bigint) - (next.count as bigint) <= BigInt(maxLead)) return { answer: counted[i]!, dropped };
    dropped++;
  }
  return answers[0] ? { answer: answers[0], dropped } : undefined;
}

/**
 * Runs one slot per upstream (each on its own upstream only) and collects their answers: all of
 * them, or what came within the wait after the first one.
 */
function runRound(ctx: CallContext, leg: Leg, upstreams: readonly Upstream[], inner: AttemptHandler): Promise<{ answers: Answer[]; errors: SvcError[] }> {
  const answers: Answer[] = [];
  const errors: SvcError[] = [];
  const link = acquireController();
  const onAbort = () => link.abort(leg.signal.reason);
  if (leg.signal.aborted) link.abort(leg.signal.reason);
  else leg.signal.addEventListener('abort', onAbort, { once: true });
  const started = performance.now();
  let running = upstreams.length;
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      leg.signal.removeEventListener('abort', onAbort);
      // Slots still running are cancelled: their attempts end as such in the trace.
      if (running > 0) link.abort();
      else releaseController(link);
      resolve({ answers, errors });
    };
    let firstAt = 0;
    const ended = () => {
      if (--running === 0) return finish();
      if (answers.length === 0) return;
      // One fast node alone must not set the count: wait for a second answer for up to WAIT_MAX_MS
      // after the first; once two are in, give the rest about as long again as the round took.
      if (answers.length === 1 && !timer) {
        firstAt = performance.now();
        timer = setTimeout(finish, WAIT_MAX_MS);
      } else if (answers.length === 2) {
        if (timer) clearTimeout(timer);
        const now = performance.now();
        const left = Math.max(0, WAIT_MAX_MS - (now - firstAt));
        timer = setTimeout(finish, Math.min(left, Math.max(WAIT_MIN_MS, now - started)));
      }
    };
    for (const u of upstreams) {
      const slot: Leg = { cursor: new UpstreamCursor([u]), reason: 'consensus_slot', signal: link.signal };
      inner(ctx, slot).then(
        (result) => {
          if (!done) answers.push({ upstreamId: u.id, count: quantity(result.result), result });
          ended();
        },
        (e: unknown) => {
          if (!done) errors.push(e as SvcError);
          ended();
        },
      );
    }
  });
}

/**
 * Creates the evm-nonce plugin (name `evm-nonce`): the `networks[].evm.nonceQuorum` key and an
 * `attempt` tap at `AttemptStage.NONCE_QUORUM` (inside consensus, outside retry and hedge).
 * @returns the plugin; it registers `svc_network_nonce_rounds_total`
 */
export function evmNoncePlugin(): Plugin {
  return definePlugin({
    name: 'evm-nonce',
    schema: { networkEvm: networkEvmSchema },
    apply(host: PluginHost) {
      const rounds = new Counter({
        name: 'svc_network_nonce_rounds_total',
        help: 'eth_getTransactionCount at pending asked of several upstreams at once, by outcome: agreement, highest, outlier_dropped, failed',
        labelNames: ['project', 'network', 'outcome'],
        registers: [host.metrics],
      });
      host.hooks.attempt.tap({ name: 'evm-nonce', stage: AttemptStage.NONCE_QUORUM }, (inner: AttemptHandler, network: Network): AttemptHandler => {
        const s = nonceQuorumOf(network);
        if (!s.enabled) return inner;
        return (ctx, leg) => {
          if (ctx.internal || leg.cursor.remaining < 2 || !asksPendingCount(ctx)) return inner(ctx, leg);
          return round(ctx, leg, s, inner);
        };
      });

      const round = async (ctx: CallContext, leg: Leg, s: NonceQuorumSettings, inner: AttemptHandler): Promise<RpcResult> => {
        const upstreams: Upstream[] = [];
        while (upstreams.length < s.maxUpstreams) {
          const u = leg.cursor.next();
          if (!u) break;
          upstreams.push(u);
        }
        const firstAttempt = ctx.record.attempts.length;
        const { answers, errors } = await runRound(ctx, leg, upstreams, inner);
        const labels = { project: ctx.project.id, network: ctx.network.id };
        const picked = pickHighest(answers, s.maxLead);
        if (!picked) {
          rounds.inc({ ...labels, outcome: 'failed' });
          // The selection had more upstreams than the round asked: the sweep tries them, one by one.
          if (leg.cursor.remaining > 0 && !leg.signal.aborted) return inner(ctx, leg);
          throw errors.length === 1 ? errors[0] : new ErrUpstreamsExhausted(errors);
        }
        const { answer, dropped } = picked;
        const outcome = dropped > 0 ? 'outlier_dropped' : answers.every((a) => a.count === answer.count) ? 'agreement' : 'highest';
        rounds.inc({ ...labels, outcome });
        if (dropped > 0) {
          host.logger.warn(
            { project: ctx.project.id, network: ctx.network.id, counts: answers.map((a) => `${a.upstreamId}=${a.result.result as string}`) },
            `eth_getTransactionCount: ${dropped} count(s) more than ${s.maxLead} above the other answers not served`,
          );
        }
        // Only the served slot keeps `:won` (spec §4.5).
        const attempts = ctx.record.attempts;
        for (let i = firstAttempt; i < attempts.length; i++) {
          const a = attempts[i];
          if (a?.won && a.upstreamId !== answer.upstreamId) a.won = false;
        }
        answer.result.upstreamId = answer.upstreamId;
        ctx.record.upstream = answer.upstreamId;
        return answer.result;
      };
    },
  });
}

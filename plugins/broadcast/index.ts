/**
 * broadcast plugin: transactions sent to several upstreams at once, and private relays.
 *
 * - `networks[].broadcast.enabled`: a transaction method (`broadcast.methods`, by default
 *   `eth_sendRawTransaction`, `eth_sendRawTransactionSync`, `eth_sendPrivateTransaction`,
 *   `eth_sendBundle`) goes to every selected upstream in parallel, once each: the `attempt` tap
 *   at `AttemptStage.BROADCAST` sits inside retry and hedge, so each member gets one slot that
 *   tries only it. The first success answers at once; the other sends run to their end (the
 *   transaction should reach them all) and are counted in
 *   `svc_tx_broadcast_total{project,network,upstream,outcome}` (`accepted`, `known` for "already
 *   known"/"nonce too low" answers, `refused` for a fact about the transaction such as a bad
 *   signature or a low fee, `failed` for an upstream that could not be reached or failed). When
 *   none succeeds, a member's refusal is returned as the node sent it (the evm-methods
 *   idempotency rule turns "already known" into the hash), else every member's error together.
 * - `upstreams[].relay: true` marks a private relay (a Flashbots Protect or MEV Blocker style
 *   endpoint that only takes transactions): every other call skips it. A network with
 *   `broadcast.private: true` sends transactions only to relays, never to a public-mempool
 *   upstream; with no relay left for a call, it fails naming private mode.
 * - Each send is an attempt with reason `consensus_slot` in `X-SVC-Upstreams` (a round of slots,
 *   as consensus broadcasts); the one that answered is `:won`.
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
  SelectStage,
  stageBetween,
  type Upstream,
  UpstreamCursor,
} from 'svc-proxy/plugin';
import { ErrEndpointNonceException, ErrUpstreamsExhausted, isPassThrough, SvcError } from 'svc-proxy/plugin/errors';

/** Transaction methods broadcast by default. */
export const DEFAULT_BROADCAST_METHODS: readonly string[] = [
  'eth_sendRawTransaction',
  'eth_sendRawTransactionSync',
  'eth_sendRawTransactionConditional',
  'eth_sendPrivateTransaction',
  'eth_sendPrivateRawTransaction',
  'eth_sendBundle',
  'mev_sendBundle',
];

/** Methods that submit something for inclusion: in private mode any of them goes to relays only, listed or not. */
const SUBMISSION = /^(?:eth|mev)_send/;

/** Longest a send of a broadcast may still run once the client has its answer, ms: the rest of the call's deadline, at most this. */
export const LATE_SEND_MAX_MS = 30_000;

const networkSchema = {
  broadcast: Type.Optional(
    Type.Object(
      {
        enabled: Type.Optional(
          Type.Boolean({ default: false, description: 'send each transaction to every selected upstream at once (once each); the first success answers' }),
        ),
        methods: Type.Optional(
          Type.Array(Type.String({ minLength: 1, maxLength: 128 }), {
            maxItems: 32,
            description:
              'the transaction methods broadcast and sent to relays (default eth_sendRawTransaction, eth_sendRawTransactionSync, eth_sendPrivateTransaction, eth_sendBundle)',
          }),
        ),
        private: Type.Optional(
          Type.Boolean({ default: false, description: 'send transactions only to upstreams with relay: true, never to a public-mempool upstream' }),
        ),
      },
      { additionalProperties: false, description: 'transaction broadcast and private relays (broadcast plugin)' },
    ),
  ),
};

const upstreamSchema = {
  relay: Type.Optional(
    Type.Boolean({ default: false, description: 'a private relay: it receives only the network’s transaction methods (broadcast.methods), never reads' }),
  ),
};

/** A network's resolved `broadcast`. */
export interface BroadcastSettings {
  enabled: boolean;
  methods: ReadonlySet<string>;
  private: boolean;
}

/**
 * Reads a network's `broadcast` block with its defaults.
 * @param network the network
 */
export function broadcastOf(network: Network): BroadcastSettings {
  const b = (network.config.settings as { broadcast?: { enabled?: boolean; methods?: string[]; private?: boolean } }).broadcast ?? {};
  return { enabled: b.enabled === true, methods: new Set(b.methods ?? DEFAULT_BROADCAST_METHODS), private: b.private === true };
}

/** Whether an upstream is a private relay (`relay: true`). */
export function isRelay(u: Upstream): boolean {
  return (u.config.settings as { relay?: unknown }).relay === true;
}

/** The outcome label of one member's send. */
function outcomeOf(e: unknown): 'known' | 'refused' | 'failed' {
  if (e instanceof ErrEndpointNonceException) return 'known';
  return e instanceof SvcError && isPassThrough(e) ? 'refused' : 'failed';
}

/** The error a slot ended with: its own upstream's last one when it is wrapped as exhausted. */
function slotError(e: unknown): unknown {
  return e instanceof ErrUpstreamsExhausted && e.causes.length > 0 ? e.causes[e.causes.length - 1] : e;
}

/**
 * Creates the broadcast plugin (name `broadcast`).
 * @returns the plugin: keys `networks[].broadcast` and `upstreams[].relay`, a `select` tap (relays) and an `attempt` tap (broadcast)
 */
export function broadcastPlugin(): Plugin {
  return definePlugin({
    name: 'broadcast',
    schema: { network: networkSchema, upstream: upstreamSchema },
    apply(host: PluginHost) {
      const sends = new Counter({
        name: 'svc_tx_broadcast_total',
        help: 'Transaction sends of a broadcast, per member upstream, by outcome: accepted, known (already known / nonce too low), refused (a fact about the transaction), failed',
        labelNames: ['project', 'network', 'upstream', 'outcome'],
        registers: [host.metrics],
      });
      const settings = new WeakMap<Network, BroadcastSettings>();
      const settingsOf = (n: Network) => {
        let s = settings.get(n);
        if (!s) settings.set(n, (s = broadcastOf(n)));
        return s;
      };

      // Relays take transactions only; in private mode, transactions go to relays only. After
      // `use-upstream`, so a pinned upstream cannot take a private transaction to a public node or
      // a read to a relay.
      const stage = stageBetween(SelectStage.USE_UPSTREAM, SelectStage.AVAILABILITY);
      const routeRelays = (ups: Upstream[], ctx: CallContext): Upstream[] => {
        if (ctx.internal) return ups;
        const s = settingsOf(ctx.network);
        const method = ctx.request.method;
        const tx = s.methods.has(method) || (s.private && SUBMISSION.test(method));
        if (tx && s.private) {
          const relays = ups.filter(isRelay);
          if (relays.length === 0 && ups.length > 0)
            throw new ErrUpstreamsExhausted([], `${ctx.network.id} sends transactions privately (broadcast.private) and no relay upstream can take this one`);
          return relays;
        }
        return tx || !ups.some(isRelay) ? ups : ups.filter((u) => !isRelay(u));
      };
      // Tapped only when some network is private or some upstream a relay: other configs pay nothing per call.
      host.hooks.configured.tap('broadcast', (c) => {
        const relay = (settings: unknown) => (settings as { relay?: unknown } | undefined)?.relay === true;
        const privateNet = (settings: unknown) => (settings as { broadcast?: { private?: unknown } } | undefined)?.broadcast?.private === true;
        if (
          c.projects.some(
            (p) =>
              relay(p.upstreamDefaults) ||
              p.upstreams.some((u) => relay(u.settings)) ||
              privateNet(p.networkDefaults) ||
              p.networks.some((n) => privateNet(n.settings)),
          )
        )
          host.hooks.select.tap({ name: 'broadcast:relays', stage }, routeRelays);
      });

      host.hooks.attempt.tap({ name: 'broadcast', stage: AttemptStage.BROADCAST }, (inner: AttemptHandler, network: Network): AttemptHandler => {
        const s = settingsOf(network);
        if (!s.enabled) return inner;
        return (ctx, leg) => {
          if (ctx.internal || !s.methods.has(ctx.request.method) || leg.cursor.remaining < 2) return inner(ctx, leg);
          return broadcast(ctx, leg, inner);
        };
      });

      const broadcast = (ctx: CallContext, leg: Leg, inner: AttemptHandler): Promise<RpcResult> => {
        const members: Upstream[] = [];
        for (let u = leg.cursor.next(); u; u = leg.cursor.next()) members.push(u);
        const count = (u: Upstream, outcome: string) => sends.inc({ project: ctx.project.id, network: ctx.network.id, upstream: u.id, outcome });
        // The sends outlive the answer (the transaction should reach every member), so they get a
        // deadline of their own: the call's remaining time, at most LATE_SEND_MAX_MS. The client
        // leaving before any member accepted still cancels them.
        let answered = false;
        const sendsCtl = new AbortController();
        const onLeave = () => {
          if (!answered) sendsCtl.abort(leg.signal.reason);
        };
        if (leg.signal.aborted) sendsCtl.abort(leg.signal.reason);
        else leg.signal.addEventListener('abort', onLeave, { once: true });
        const cap = setTimeout(() => sendsCtl.abort(), Math.min(LATE_SEND_MAX_MS, Math.max(1000, ctx.deadline - Date.now())));
        cap.unref();
        return new Promise<RpcResult>((resolve, reject) => {
          let pending = members.length;
          const errors: unknown[] = [];
          const ended = () => {
            if (--pending === 0) {
              clearTimeout(cap);
              leg.signal.removeEventListener('abort', onLeave);
            }
            if (answered || pending > 0) return;
            // No member accepted it: a member's word about the transaction is the answer, as the node sent it.
            const fact = errors.find((e) => e instanceof SvcError && isPassThrough(e));
            reject(fact ?? new ErrUpstreamsExhausted(errors.filter((e): e is SvcError => e instanceof SvcError)));
          };
          for (const u of members) {
            const slot: Leg = { cursor: new UpstreamCursor([u]), reason: 'consensus_slot', signal: sendsCtl.signal };
            inner(ctx, slot).then(
              (r) => {
                count(u, 'accepted');
                if (answered) {
                  // Only the send that answered is `:won` (spec §4.5).
                  for (const a of ctx.record.attempts) if (a.upstreamId === u.id) a.won = false;
                } else {
                  answered = true;
                  r.upstreamId = u.id;
                  ctx.record.upstream = u.id;
                  resolve(r);
                }
                ended();
              },
              (e: unknown) => {
                const err = slotError(e);
                count(u, outcomeOf(err));
                errors.push(err);
                ended();
              },
            );
          }
        });
      };
    },
  });
}

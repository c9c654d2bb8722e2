/**
 * x402 plugin (spec §5 item 1, the pay-per-request auth strategy): provides the auth strategy type `x402` and taps `admit`.
 *
 * A project lists `{type: x402, x402: {...}}` among its auth strategies; a caller another strategy accepts (an API key) is served as
 * before, a caller without credentials may pay instead. The strategy accepts such a caller provisionally (before the body is read);
 * once the calls are known, `admit` prices them (offers.ts), answers HTTP 402 with the x402 challenge when no payment is presented,
 * checks a presented one before any upstream work and claims it once across the fleet (payment.ts), runs the calls as the payer, and
 * settles after the answer only when every call was answered (settle.ts). Verification and settlement go through a configured x402
 * facilitator, or through svc's own networks with a settler key (facilitator.ts).
 */
import { Counter } from 'prom-client';
import { type Admission, definePlugin, type HttpRequestInfo, type Plugin, type PluginHost, resolveConfigBlock } from 'svc-proxy/plugin';
import { ConfigError, ErrInternal } from 'svc-proxy/plugin/errors';
import { AUTH_SERVICE, type ClaimStore } from 'svc-proxy/plugins/auth';
import { COST_SERVICE } from 'svc-proxy/plugins/cost';
import { sleep } from 'svc-proxy/util';
import { WEBSOCKET_SERVICE } from 'svc-proxy/plugins/websocket';
import { type Facilitator, loadLib, localFacilitator, type PaymentPayload, remoteFacilitator } from './facilitator.ts';
import { type Offer, Pricing, type V1Names } from './offers.ts';
import { type Accepted, type Authorization, challenge, checkPayment, type Codec, ErrPaymentRequired } from './payment.ts';
import { PrepaidConnection } from './prepaid.ts';
import { settleAnswered, type SettleDeps } from './settle.ts';
import { X402Schema, type X402Settings } from './schema.ts';
import { normalizeX402Shapes } from './erpc.ts';

export { ErrPaymentRequired } from './payment.ts';
export { X402Schema, type X402Settings } from './schema.ts';

/** One compiled `x402` strategy. */
interface Strategy {
  projectId: string;
  settings: X402Settings;
  pricing: Pricing;
  claims: ClaimStore;
  facilitators: Map<string, Promise<Facilitator>>;
}

/** Longest a shutdown waits for settlements still running, ms. */
const SHUTDOWN_SETTLE_WAIT_MS = 10_000;

/** Labels of `svc_x402_payments_total` but the outcome. */
type Labels = { project: string; network: string };

function header(http: HttpRequestInfo, name: string): string | undefined {
  const v = http.headers[name];
  return typeof v === 'string' ? v : Array.isArray(v) ? v[0] : undefined;
}

/**
 * Creates the x402 plugin (name `x402`).
 * @returns a plugin providing the `x402` auth strategy type, tapping `admit`; depends on auth (the strategy registry, claim stores) and
 *   cost (credits of a call)
 */
export function x402Plugin(): Plugin {
  return definePlugin({
    name: 'x402',
    dependsOn: ['auth', 'cost'],
    needs: [AUTH_SERVICE, COST_SERVICE],
    schema: { normalize: normalizeX402Shapes },
    apply(host: PluginHost) {
      const auth = host.services.require(AUTH_SERVICE);
      const cost = host.services.require(COST_SERVICE);
      const payments = new Counter({
        name: 'svc_x402_payments_total',
        help: 'Pay-per-request outcomes: required (402 without payment), refused (402 for a payment), settled, settle_failed, unsettled (a call failed: not charged)',
        labelNames: ['project', 'network', 'outcome'],
        registers: [host.metrics],
      });
      const settled = new Counter({
        name: 'svc_x402_settled_amount_total',
        help: 'Amounts settled, in atomic units of the asset, by payment chain (CAIP-2) and asset',
        labelNames: ['project', 'network', 'asset'],
        registers: [host.metrics],
      });
      const retries = new Counter({
        name: 'svc_x402_settle_retries_total',
        help: 'Settlements retried after failing to reach the facilitator or chain',
        labelNames: ['project'],
        registers: [host.metrics],
      });
      /** The strategy that accepted a request, by its HTTP facts (the same object reaches `admit`). */
      const accepted = new WeakMap<HttpRequestInfo, Strategy>();
      /** Strategies compiled at start: their facilitators are asked /supported once svc listens. */
      const strategies = new Set<Strategy>();
      let v1Names: V1Names | undefined;

      auth.registerStrategy('x402', {
        compile(block, ctx) {
          const projectId = ctx.scope.projectId;
          if (projectId === undefined)
            throw new ConfigError([{ path: ctx.path, message: 'pay per request is a project strategy: a door has no priced calls' }]);
          const settings = resolveConfigBlock(X402Schema, block, ctx.path);
          if (!settings.facilitator && !settings.settler)
            throw new ConfigError([
              {
                path: ctx.path,
                message: 'set facilitator.url (an x402 facilitator), or settler.privateKey (svc verifies and settles through its own networks)',
              },
            ]);
          const strategy: Strategy = {
            projectId,
            settings,
            pricing: new Pricing(settings, ctx.path, (n, m) => cost.quoteCredits(n, m)),
            claims: ctx.claims(settings.nonces),
            facilitators: new Map(),
          };
          strategies.add(strategy);
          tapAdmit();
          // Load the packages off the first paid request's path.
          void loadLib().catch((e: unknown) => host.logger.error({ err: String(e) }, 'x402: the @x402 packages failed to load'));
          return async (http) => {
            accepted.set(http, strategy);
            return { userId: 'x402' };
          };
        },
      });

      const facilitatorFor = (s: Strategy, network: string): Promise<Facilitator> => {
        let f = s.facilitators.get(network);
        if (!f) {
          const fac = s.settings.facilitator;
          const project = host.projects.get(s.projectId);
          f = fac
            ? remoteFacilitator(fac.url, Number(fac.timeout ?? 10_000))
            : project
              ? localFacilitator(host, project, Number(network.slice('eip155:'.length)), s.settings.settler!.privateKey as `0x${string}`, 60_000)
              : Promise.reject(new Error(`project ${s.projectId} is gone`));
          f.catch(() => s.facilitators.delete(network));
          s.facilitators.set(network, f);
        }
        return f;
      };

      /** The packages, and x402 v1's chain names, once loaded. */
      const libs = async () => {
        const lib = await loadLib();
        v1Names ??= new Map(Object.entries(lib.v1.EVM_NETWORK_CHAIN_ID_MAP).map(([name, id]) => [id, name]));
        return { lib, codec: lib.http as unknown as Codec, v1Names };
      };

      /**
       * The payment a request (or an upgrade) presents, checked against `offers`; a request without one gets the challenge.
       * @throws ErrPaymentRequired (HTTP 402) with the challenge and the reason
       */
      const takePayment = async (s: Strategy, http: HttpRequestInfo, offers: Offer[], codec: Codec, labels: Labels, what: string): Promise<Accepted> => {
        const resource = { url: `http://${http.host}${http.path}`, description: s.settings.description ?? 'JSON-RPC calls' };
        const v2 = header(http, 'payment-signature');
        const v1 = v2 === undefined ? header(http, 'x-payment') : undefined;
        if (v2 === undefined && v1 === undefined) {
          payments.inc({ ...labels, outcome: 'required' });
          throw challenge(codec, offers, `payment required: send PAYMENT-SIGNATURE (x402 v2) or X-PAYMENT (v1) for ${what}`, resource);
        }
        try {
          return await checkPayment(
            {
              codec,
              facilitatorFor: (n) => facilitatorFor(s, n),
              claim: (id, ttl) => s.claims.claim(id, ttl),
              verifyTimeoutMs: Number(s.settings.verifyTimeout ?? 5_000),
              precheck: (payment, offer, auth) => recoverPayer(payment, offer, auth),
              refuse: (reason) => challenge(codec, offers, reason, resource),
            },
            (v2 ?? v1) as string,
            v2 !== undefined ? 2 : 1,
            offers,
          );
        } catch (e) {
          payments.inc({ ...labels, outcome: 'refused' });
          throw e;
        }
      };

      /** An EOA signature (65 bytes) recovered locally: one that is not the payer's is refused before any chain read. */
      const recoverPayer = async (payment: PaymentPayload, offer: Offer, auth: Authorization): Promise<string | undefined> => {
        const signature = payment.payload.signature as `0x${string}`;
        if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) return undefined;
        const { lib } = await libs();
        const signer = await lib.viem.recoverTypedDataAddress({
          domain: {
            name: offer.accept.eip712.name,
            version: offer.accept.eip712.version,
            chainId: Number(offer.v2.network.slice('eip155:'.length)),
            verifyingContract: offer.v2.asset as `0x${string}`,
          },
          types: lib.evm.authorizationTypes,
          primaryType: 'TransferWithAuthorization',
          message: {
            from: auth.from as `0x${string}`,
            to: auth.to as `0x${string}`,
            value: BigInt(auth.value),
            validAfter: BigInt(auth.validAfter),
            validBefore: BigInt(auth.validBefore),
            nonce: auth.nonce as `0x${string}`,
          },
          signature,
        });
        return signer.toLowerCase() === auth.from.toLowerCase() ? undefined : 'invalid_exact_evm_payload_signature (the signature is not the payer’s)';
      };

      /** What settling a payment of `s` needs; outcomes counted under `labels`. */
      const settleDeps = async (s: Strategy, paid: Accepted, labels: Labels): Promise<SettleDeps> => {
        const { lib } = await libs();
        return {
          facilitator: await facilitatorFor(s, paid.offer.v2.network),
          timeoutMs: Number(s.settings.settleTimeout ?? 3_000),
          retries: s.settings.settleRetries ?? 3,
          retried: () => retries.inc({ project: labels.project }),
          encode: (x) => (lib.http as unknown as { encodePaymentResponseHeader(v: unknown): string }).encodePaymentResponseHeader(x),
          track: (settling) => {
            background.add(settling);
            void settling.finally(() => background.delete(settling));
          },
          done: (outcome, p, settlement, error) => {
            payments.inc({ ...labels, outcome });
            const facts = {
              project: labels.project,
              payer: p.payer,
              amount: p.offer.v2.amount,
              network: p.offer.v2.network,
              transaction: settlement?.transaction,
            };
            if (outcome === 'settled')
              settled.inc({ project: labels.project, network: p.offer.v2.network, asset: p.offer.v2.asset.toLowerCase() }, Number(p.offer.amount));
            if (outcome === 'settle_failed') host.logger.error({ ...facts, err: error }, 'x402: a served request could not be settled');
            else host.logger.debug({ ...facts, outcome }, 'x402 payment');
          },
        };
      };

      /** An HTTP request: priced, paid, run as the payer, settled once answered. */
      const admitRequest = async (s: Strategy, a: Admission): Promise<void> => {
        const { codec, v1Names: names } = await libs();
        const { offers, credits } = s.pricing.offers(a.network, a.calls, await Promise.all(a.calls.map((c) => a.networkOf(c))), a.http, names);
        if (offers.every((o) => o.amount === 0n)) return;
        const labels = { project: a.project.id, network: a.network?.id ?? 'body' };
        const paid = await takePayment(s, a.http, offers, codec, labels, 'these calls');
        // The payer is who the calls run as: rate-limit budgets, logs and metrics see the address.
        a.identity = { ...a.identity, userId: paid.payer, strategy: 'x402' };
        const deps = await settleDeps(s, paid, labels);
        a.onAnswered((records, sink) => {
          sink.set('X-SVC-Payment-Amount', paid.offer.v2.amount);
          sink.set('X-SVC-Payment-Credits', String(credits));
          return settleAnswered(deps, paid, records, sink);
        });
      };

      /** A message on a prepaid WebSocket: its calls counted down from the connection's balance. */
      const admitMessage = async (s: Strategy, a: Admission): Promise<void> => {
        const prepaid = a.session ? connections.get(a.session) : undefined;
        if (!prepaid) throw new ErrPaymentRequired('payment required: open the WebSocket with a prepaid payment (x402.websocket.prepaid)');
        const { v1Names: names } = await libs();
        const { offers } = s.pricing.offers(a.network, a.calls, await Promise.all(a.calls.map((c) => a.networkOf(c))), a.http, names);
        const cost = offers.find((o) => o.accept === prepaid.paid.offer.accept)?.amount ?? 0n;
        a.identity = { ...a.identity, userId: prepaid.paid.payer, strategy: 'x402' };
        prepaid.charge(cost);
        a.onAnswered((records) => prepaid.answered(records, cost));
      };

      /** Settlements still running when their answer went: a drain waits for them (bounded), so a rolling deploy loses none. */
      const background = new Set<Promise<unknown>>();
      host.hooks.shutdown.tapPromise('x402', async () => {
        if (background.size === 0) return;
        host.logger.info({ settling: background.size }, 'x402: waiting for settlements still running');
        const waited = new AbortController();
        await Promise.race([Promise.allSettled([...background]), sleep(SHUTDOWN_SETTLE_WAIT_MS, waited.signal, true)]);
        waited.abort();
        if (background.size > 0)
          host.logger.error({ settling: background.size }, 'x402: settlements still running at shutdown are abandoned (their authorizations expire)');
      });

      // A facilitator that does not take a configured way to pay is found at start, not by the first payer: asked once, off the
      // request path; a mismatch or an unreachable facilitator is logged (payments are still tried: it may be down only now).
      host.hooks.listening.tapPromise('x402', async () => {
        for (const s of strategies) {
          const fac = s.settings.facilitator;
          if (!fac) continue;
          void remoteFacilitator(fac.url, Number(fac.timeout ?? 10_000))
            .then((f) => f.getSupported())
            .then(
              (supported) => {
                const offered = [...s.settings.accepts, ...Object.values(s.settings.networks ?? {}).flatMap((n) => n.accepts ?? [])];
                const missing = offered.filter(
                  (a) => !supported.kinds.some((k) => k.x402Version === 2 && k.scheme === (a.scheme ?? 'exact') && k.network === a.network),
                );
                if (missing.length > 0)
                  host.logger.warn(
                    { project: s.projectId, facilitator: fac.url, missing: missing.map((a) => `${a.scheme ?? 'exact'} on ${a.network}`) },
                    'x402: the facilitator does not list these ways to pay as supported; payments with them will be refused',
                  );
              },
              (e: unknown) =>
                host.logger.warn(
                  { project: s.projectId, facilitator: fac.url, err: String(e).slice(0, 200) },
                  'x402: the facilitator did not answer /supported',
                ),
            );
        }
      });

      // Tapped with the first strategy compiled: core skips `admit` (and its promise) per request while nothing taps it, so a svc
      // without pay per request pays nothing for it.
      let tapped = false;
      const tapAdmit = () => {
        if (tapped) return;
        tapped = true;
        host.hooks.admit.tapPromise('x402', async (a) => {
          if (a.identity?.strategy !== 'x402') return;
          const s = accepted.get(a.http);
          // Fail closed: an x402 identity without its strategy would otherwise be served unpaid.
          if (!s) throw new ErrInternal('x402: the strategy that accepted this request is not known');
          await (a.transport === 'websocket' ? admitMessage(s, a) : admitRequest(s, a));
        });
      };

      // A WebSocket upgrade by a caller who pays buys `websocket.prepaid` up front (settled once a call on it was answered).
      const connections = new WeakMap<object, PrepaidConnection>();
      /** The same connections by their upgrade's HTTP facts (what the websocket plugin's observation hooks carry). */
      const byUpgrade = new WeakMap<HttpRequestInfo, PrepaidConnection>();
      host.hooks.configured.tap('x402', () => {
        const ws = host.services.get(WEBSOCKET_SERVICE);
        if (!ws || strategies.size === 0 || ws.upgrade.taps.some((t) => t.name === 'x402')) return;
        ws.upgrade.tapPromise('x402', async (u) => {
          if (u.identity?.strategy !== 'x402') return;
          const s = accepted.get(u.http);
          if (!s) return;
          const amount = s.settings.websocket?.prepaid;
          if (amount === undefined)
            throw new ErrPaymentRequired('pay per request over WebSocket is not offered here (x402.websocket.prepaid is not set): use HTTP');
          const { codec, v1Names: names } = await libs();
          const labels = { project: u.project.id, network: u.network?.id ?? 'body' };
          const offers = s.pricing.fixedOffers(u.network, BigInt(amount), u.http, names);
          const paid = await takePayment(s, u.http, offers, codec, labels, 'a prepaid WebSocket connection');
          u.identity = { ...u.identity, userId: paid.payer, strategy: 'x402' };
          const prepaid = new PrepaidConnection(paid, await settleDeps(s, paid, labels));
          connections.set(u.session, prepaid);
          byUpgrade.set(u.http, prepaid);
        });
        // A subscription serves the connection (its notifications are covered by the prepaid amount): the payment settles then.
        ws.hooks.subscribe.tap('x402', (c) => byUpgrade.get(c.http)?.served());
      });
    },
  });
}

/**
 * What a request costs and how it may be paid (spec §5 item 1): the price of each call from svc's credit table (`X-SVC-Credits` units ×
 * `perCredit`, else `perCall`, per-method overrides first), summed over the body, and one x402 offer per accepted way to pay, in the v2
 * (`PAYMENT-REQUIRED`) and v1 (body) shapes.
 */
import type { HttpRequestInfo, Network, ParsedCall } from 'svc-proxy/plugin';
import { ConfigError } from 'svc-proxy/plugin/errors';
import { compileGlobs } from 'svc-proxy/util';
import type { AcceptSettings, PriceSettings, X402Settings } from './schema.ts';

/** x402 v2 `PaymentRequirements` (the `@x402/core` type, restated so this module loads without the package). */
export interface Requirements {
  scheme: string;
  network: string;
  asset: string;
  amount: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra: Record<string, unknown>;
}

/** x402 v1 `PaymentRequirements`. */
export interface RequirementsV1 {
  scheme: string;
  network: string;
  maxAmountRequired: string;
  resource: string;
  description: string;
  mimeType: string;
  outputSchema: Record<string, unknown>;
  payTo: string;
  maxTimeoutSeconds: number;
  asset: string;
  extra: Record<string, unknown>;
}

/** One way to pay this request: its price in the asset's atomic units. */
export interface Offer {
  accept: AcceptSettings;
  /** Atomic units of `accept.asset`. */
  amount: bigint;
  v2: Requirements;
  /** Absent when the payment chain has no x402 v1 name. */
  v1?: RequirementsV1;
}

/** The price of one call on a network, atomic units. */
type CallPrice = (method: string, credits: () => number) => bigint;

/** Credits are priced in millionths so a fractional credit (0.5) rounds up to a whole atomic unit, never down to free. */
const SCALE = 1_000_000n;

/**
 * Compiles a price block.
 * @throws ConfigError when it sets neither `perCredit` nor `perCall`
 */
export function compilePrice(p: PriceSettings, path: string): CallPrice {
  if (p.perCredit === undefined && p.perCall === undefined) throw new ConfigError([{ path, message: 'set perCredit or perCall' }]);
  const entries = Object.entries(p.methods ?? {});
  const exact = new Map(entries.filter(([k]) => !/[*?]/.test(k)).map(([k, v]) => [k, BigInt(v)]));
  const globs = entries.filter(([k]) => /[*?]/.test(k)).map(([k, v]) => [compileGlobs(k), BigInt(v)] as const);
  const perCredit = p.perCredit === undefined ? undefined : BigInt(p.perCredit);
  const perCall = BigInt(p.perCall ?? '0');
  return (method, credits) => {
    const own = exact.get(method) ?? globs.find(([g]) => g(method))?.[1];
    if (own !== undefined) return own;
    if (perCredit === undefined) return perCall;
    const scaled = BigInt(Math.ceil(credits() * Number(SCALE)));
    return (scaled * perCredit + SCALE - 1n) / SCALE;
  };
}

/** A credit quote as a price may use it: finite and at least 0 (a table's NaN or negative never breaks a price or lowers it below free). */
function saneCredits(n: number): number {
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/** The x402 v1 name of a chain (`base`, `base-sepolia`), from `@x402/evm/v1`'s table, loaded with the package. */
export type V1Names = ReadonlyMap<number, string>;

/** A compiled `x402` block's pricing: offers for a request. */
export class Pricing {
  private readonly price: CallPrice;
  private readonly byNetwork = new Map<string, { accepts?: readonly AcceptSettings[]; price?: CallPrice }>();
  private readonly acceptPrice = new Map<AcceptSettings, CallPrice>();

  /**
   * @param settings the validated block
   * @param path its config path
   * @param quote credits of one call of a method on a network (the cost service)
   * @throws ConfigError for a price block that prices nothing
   */
  constructor(
    private readonly settings: X402Settings,
    path: string,
    private readonly quote: (network: Network, method: string) => number,
  ) {
    this.price = compilePrice(settings.price, `${path}.price`);
    const eachAccept = (list: readonly AcceptSettings[], at: string) =>
      list.forEach((a, i) => a.price && this.acceptPrice.set(a, compilePrice(a.price, `${at}[${i}].price`)));
    eachAccept(settings.accepts, `${path}.accepts`);
    for (const [id, n] of Object.entries(settings.networks ?? {})) {
      if (n.accepts) eachAccept(n.accepts, `${path}.networks.${id}.accepts`);
      this.byNetwork.set(id, { accepts: n.accepts, price: n.price && compilePrice(n.price, `${path}.networks.${id}.price`) });
    }
  }

  /**
   * The offers for a request's calls, each valid call on its network as serving it resolves it (`Admission.networkOf`); invalid
   * elements and calls on networks the project does not serve cost nothing (they are answered with their error, never served).
   * @param networks the network of each call, in body order
   * @returns the offers (amount 0 when nothing is priced) and the total credits quoted
   */
  offers(
    urlNetwork: Network | undefined,
    calls: readonly ParsedCall[],
    networks: ReadonlyArray<Network | undefined>,
    http: HttpRequestInfo,
    v1Names: V1Names,
  ): { offers: Offer[]; credits: number } {
    const accepts = (urlNetwork && this.byNetwork.get(urlNetwork.id)?.accepts) ?? this.settings.accepts;
    const totals = new Map<AcceptSettings, bigint>(accepts.map((a) => [a, 0n]));
    let credits = 0;
    calls.forEach((call, i) => {
      // An invalid element, or a call on a network the project does not serve, is answered with its error and never served: free.
      const network = networks[i];
      if (call.invalid || !network) return;
      let quoted: number | undefined;
      const creditsOf = () => (quoted ??= saneCredits(this.quote(network, call.method)));
      const networkPrice = network && this.byNetwork.get(network.id)?.price;
      for (const a of accepts) totals.set(a, (totals.get(a) ?? 0n) + (this.acceptPrice.get(a) ?? networkPrice ?? this.price)(call.method, creditsOf));
      credits += creditsOf();
    });
    return { offers: this.build(accepts, totals, http, v1Names), credits };
  }

  /**
   * The offers for a fixed amount (a prepaid WebSocket connection), in every accepted way to pay of the URL's network.
   * @param amount atomic units
   */
  fixedOffers(urlNetwork: Network | undefined, amount: bigint, http: HttpRequestInfo, v1Names: V1Names): Offer[] {
    const accepts = (urlNetwork && this.byNetwork.get(urlNetwork.id)?.accepts) ?? this.settings.accepts;
    return this.build(accepts, new Map(accepts.map((a) => [a, amount])), http, v1Names);
  }

  private build(accepts: readonly AcceptSettings[], totals: ReadonlyMap<AcceptSettings, bigint>, http: HttpRequestInfo, v1Names: V1Names): Offer[] {
    const resource = `http://${http.host}${http.path}`;
    return accepts.map((accept) => {
      const amount = totals.get(accept) ?? 0n;
      const maxTimeoutSeconds = accept.maxTimeoutSeconds ?? 300;
      const extra = { name: accept.eip712.name, version: accept.eip712.version };
      const v2: Requirements = {
        scheme: accept.scheme ?? 'exact',
        network: accept.network,
        asset: accept.asset,
        amount: String(amount),
        payTo: accept.payTo,
        maxTimeoutSeconds,
        extra,
      };
      const name = v1Names.get(Number(accept.network.slice('eip155:'.length)));
      const v1: RequirementsV1 | undefined = name
        ? {
            scheme: v2.scheme,
            network: name,
            maxAmountRequired: v2.amount,
            resource,
            description: this.settings.description ?? 'JSON-RPC calls',
            mimeType: 'application/json',
            outputSchema: {},
            payTo: v2.payTo,
            maxTimeoutSeconds,
            asset: v2.asset,
            extra,
          }
        : undefined;
      return { accept, amount, v2, ...(v1 ? { v1 } : {}) };
    });
  }
}

/**
 * The `x402` strategy block (spec §5 item 1, pay per request), checked in full when the auth plugin compiles the strategy. Amounts are
 * decimal strings of the token's atomic units (USDC has 6 decimals: "1000" is $0.001), never floats.
 */
import { Duration, type Static, Strict, Type } from 'svc-proxy/plugin';

/** An EVM address. */
const Address = (description: string) => Type.String({ pattern: '^0x[0-9a-fA-F]{40}$', description });
/** An amount in the token's atomic units. */
const Amount = (description: string) => Type.String({ pattern: '^[0-9]{1,40}$', description });

/** What one call costs (spec §4.5 credits × a price per credit, or a flat price, with per-method overrides). */
export const PriceSchema = Strict(
  {
    perCredit: Type.Optional(
      Amount('atomic units per credit unit: a call costs the most credits any upstream of its network would cost (the X-SVC-Credits table) × this'),
    ),
    perCall: Type.Optional(Amount('atomic units per call, whatever its credits (eRPC `pricePerRequest`); used when perCredit is not set')),
    methods: Type.Optional(
      Type.Record(Type.String({ minLength: 1, maxLength: 128 }), Amount('atomic units'), {
        description: 'method name or glob → atomic units per call, before perCredit/perCall (first match in order: exact names, then globs)',
      }),
    ),
  },
  { description: 'the price of a call; a batch costs the sum of its calls' },
);

/** One accepted way to pay (an x402 v2 `PaymentRequirements` row without its amount). */
export const AcceptSchema = Strict({
  scheme: Type.Optional(Type.Literal('exact', { default: 'exact', description: 'x402 scheme; `exact` (EIP-3009 transferWithAuthorization)' })),
  network: Type.String({ pattern: '^eip155:[1-9][0-9]{0,18}$', description: 'CAIP-2 chain of the payment, e.g. eip155:8453 (Base)' }),
  asset: Address('the EIP-3009 token contract (e.g. USDC)'),
  payTo: Address('the address paid'),
  eip712: Strict(
    {
      name: Type.String({ minLength: 1, maxLength: 64, description: "the token's EIP-712 domain name, e.g. `USD Coin`" }),
      version: Type.String({ minLength: 1, maxLength: 16, description: "the token's EIP-712 domain version, e.g. `2`" }),
    },
    { description: 'the domain the payer signs under' },
  ),
  maxTimeoutSeconds: Type.Optional(Type.Integer({ minimum: 10, maximum: 86_400, default: 300, description: 'how long a signed payment stays valid, seconds' })),
  price: Type.Optional(PriceSchema),
});

/** Where payments are verified and settled. */
const FacilitatorSchema = Strict({
  url: Type.String({ pattern: '^https?://', description: 'an x402 facilitator (`/verify`, `/settle`, `/supported`); unset: svc verifies and settles itself' }),
  timeout: Type.Optional(Duration({ default: '10s', description: 'per facilitator request' })),
});

/** The `x402` block. */
export const X402Schema = Strict({
  accepts: Type.Array(AcceptSchema, { minItems: 1, maxItems: 16, description: 'ways to pay, any one accepted' }),
  price: PriceSchema,
  networks: Type.Optional(
    Type.Record(
      Type.String({ pattern: '^evm:[1-9][0-9]{0,18}$' }),
      Strict({ accepts: Type.Optional(Type.Array(AcceptSchema, { minItems: 1, maxItems: 16 })), price: Type.Optional(PriceSchema) }),
      { description: "per served network (`evm:<chainId>`): its own ways to pay and price, instead of the block's" },
    ),
  ),
  facilitator: Type.Optional(FacilitatorSchema),
  settler: Type.Optional(
    Strict(
      {
        privateKey: Type.String({
          pattern: '^0x[0-9a-fA-F]{64}$',
          description: 'key of the account that sends transferWithAuthorization (pays its gas) when svc settles itself; use ${VAR}',
        }),
      },
      { description: 'svc verifies and settles itself, through its own networks of the same project (`evm:<chainId>` of the payment)' },
    ),
  ),
  verifyTimeout: Type.Optional(Duration({ default: '5s', description: 'a payment not verified within this is refused (402)' })),
  settleTimeout: Type.Optional(
    Duration({ default: '3s', description: 'longest the answer waits for the settlement; past it, the answer goes without a receipt and settlement goes on' }),
  ),
  settleRetries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, default: 3, description: 'retries of a settlement that failed to reach the chain' })),
  description: Type.Optional(Type.String({ maxLength: 256, description: 'what is sold, in the 402 answer' })),
  websocket: Type.Optional(
    Strict(
      {
        prepaid: Amount(
          'atomic units a WebSocket upgrade pays for (its price in the 402 of the upgrade); each call on the socket is counted down from it at the prices above',
        ),
      },
      { description: 'pay-per-request WebSocket connections: unset, a caller who would pay cannot open one' },
    ),
  ),
  nonces: Type.Optional(
    Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          "where used payment authorizations are recorded (a connector like a database strategy's); default: the block's first database connector, else memory",
      },
    ),
  ),
});

/** A validated `x402` block (durations in ms). */
export type X402Settings = Static<typeof X402Schema>;
/** A validated price. */
export type PriceSettings = Static<typeof PriceSchema>;
/** A validated accepted way to pay. */
export type AcceptSettings = Static<typeof AcceptSchema>;

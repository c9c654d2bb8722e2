/**
 * The one auth strategy schema (spec §5.1): `projects[].auth` (this plugin's
 * config key) and every `auth` block another plugin owns (`admin.auth`, `healthCheck.auth`, an
 * in-house route's), which that plugin declares with `AuthBlockSchema()` and this plugin checks
 * against the same schema when the `auth` service compiles it (`AuthService.compile`), with the
 * paths and messages `svc validate` gives any config key.
 */
import { Duration, type Static, Strict, Type } from 'svc-proxy/plugin';
import { StorageBreakerSchema } from 'svc-proxy/util';

/** Deadlines and circuit breaker of a remote key store (Redis, PostgreSQL). */
const storeGuard = {
  lookupTimeout: Type.Optional(
    Duration({ default: '500ms', description: 'a key lookup slower than this fails closed (the request is refused as unauthorized)' }),
  ),
  writeTimeout: Type.Optional(
    Duration({ default: '2s', description: 'admin changes and listings slower than this fail with an error (a change may still be applied)' }),
  ),
  breaker: Type.Optional(StorageBreakerSchema),
};

/** Fields every strategy may carry. */
const common = {
  rateLimitBudget: Type.Optional(
    Type.String({ minLength: 1, description: 'budget id from `rateLimiters.budgets[]` counting the requests this strategy accepts' }),
  ),
  allowClientDirectives: Type.Optional(
    Type.String({ description: 'spec §2.8 rule c: directives this strategy lets its callers send (unset: the network and project rules apply)' }),
  ),
  trustUserIdHeader: Type.Optional(
    Type.Boolean({ default: false, description: 'take the user id from `X-SVC-User-Id`; such a caller gets no directive grant' }),
  ),
};

const secret = Strict({
  type: Type.Literal('secret'),
  secret: Strict({
    value: Type.String({
      minLength: 1,
      description: 'sent as query `secret`, header `X-SVC-Secret-Token`, or `Authorization: Bearer`/`Basic` (the password); compared in constant time',
    }),
    id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description: 'name of the secret in metrics (`secret_id`) and logs; default `strategy-<index>`; never the value',
      }),
    ),
  }),
  ...common,
});

const network = Strict({
  type: Type.Literal('network'),
  network: Strict({
    allowLocalhost: Type.Optional(Type.Boolean({ default: false, description: 'let 127.0.0.0/8 and ::1 in' })),
    allowedCIDRs: Type.Optional(Type.Array(Type.String(), { description: 'IPv4 or IPv6 CIDRs; orchestrator probes come from node addresses (spec §5.3)' })),
    allowedIPs: Type.Optional(Type.Array(Type.String(), { description: 'single addresses' })),
  }),
  ...common,
});

const jwt = Strict({
  type: Type.Literal('jwt'),
  jwt: Strict({
    allowedAlgorithms: Type.Array(Type.String({ minLength: 1 }), {
      minItems: 1,
      description: 'JWS algorithms accepted, e.g. [RS256, ES256]; `none` is never accepted',
    }),
    allowedIssuers: Type.Optional(Type.Array(Type.String(), { description: '`iss` must be one of these' })),
    allowedAudiences: Type.Optional(Type.Array(Type.String(), { description: '`aud` must contain one of these' })),
    requiredClaims: Type.Optional(Type.Array(Type.String(), { description: 'claims that must be present' })),
    verificationKeys: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description: 'key id → PEM public key (SPKI), JWK JSON, or for HS* a shared secret; a token with a `kid` uses that key, else each key is tried',
      }),
    ),
    jwksUrl: Type.Optional(Type.String({ pattern: '^https?://', description: 'JWKS endpoint, fetched and cached by jose' })),
    userIdClaim: Type.Optional(Type.String({ default: 'sub', description: 'claim holding the user id' })),
    rateLimitBudgetClaim: Type.Optional(Type.String({ default: 'rlm', description: 'claim naming a budget; an unknown budget rejects the token' })),
    clockTolerance: Type.Optional(Duration({ default: '0s', description: 'slack on exp/nbf' })),
  }),
  ...common,
});

/** A database connector of API keys (spec §2.3): the cache connectors' driver settings. */
export const ConnectorSchema = Strict({
  id: Type.String({ minLength: 1, description: 'connectorId of the admin API-key methods' }),
  driver: Type.Union([Type.Literal('memory'), Type.Literal('redis'), Type.Literal('postgresql')]),
  memory: Type.Optional(Strict({ maxItems: Type.Optional(Type.Integer({ minimum: 1, default: 100_000 })) })),
  redis: Type.Optional(
    Strict({
      uri: Type.String({ description: 'redis://[user:password@]host:port[/db]' }),
      password: Type.Optional(Type.String()),
      keyPrefix: Type.Optional(Type.String({ default: 'svc_auth:' })),
      ...storeGuard,
    }),
  ),
  postgresql: Type.Optional(
    Strict({
      connectionUri: Type.String({ description: 'postgres://user:password@host:port/db' }),
      table: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', default: 'svc_api_keys' })),
      ...storeGuard,
    }),
  ),
});

/** `siwe` (declared after {@link ConnectorSchema}: its nonce store takes the same connector block). */
const siwe = Strict({
  type: Type.Literal('siwe'),
  siwe: Strict({
    allowedDomains: Type.Array(Type.String({ minLength: 1 }), { minItems: 1, description: 'EIP-4361 `domain` values accepted' }),
    maxMessageAge: Type.Optional(Duration({ default: '1d', description: 'a message without an expirationTime is refused once its issuedAt is this old' })),
    clockTolerance: Type.Optional(
      Duration({ default: '1m', description: 'slack on issuedAt (not in the future), notBefore and expirationTime, for clients whose clock drifts' }),
    ),
    nonces: Type.Optional(
      Strict(ConnectorSchema.properties, {
        description:
          "where used messages are recorded (each is accepted once): a connector like a database strategy's; default: the connector of the first database strategy of the same auth block, else memory (per process)",
      }),
    ),
  }),
  ...common,
});

const database = Strict({
  type: Type.Literal('database'),
  connector: ConnectorSchema,
  failOpen: Type.Optional(
    Strict(
      {
        enabled: Type.Boolean({ default: false, description: 'serve the emergency user while the key store fails (unreachable, too slow, its breaker open)' }),
        userId: Type.Optional(
          Type.String({ minLength: 1, maxLength: 128, description: 'the emergency user every key is served as while the store fails (required when enabled)' }),
        ),
        rateLimitBudget: Type.Optional(
          Type.String({
            minLength: 1,
            maxLength: 64,
            description: "the emergency user's budget (a `rateLimiters.budgets` id): what a store outage may let through",
          }),
        ),
      },
      {
        description:
          "eRPC's fail-open API-key lookups: while the store fails, a request with a key is served as `userId` (a key the store says is unknown or disabled is still refused; keys in the replica's cache keep their own user). Off: a lookup that fails refuses the call (fail closed)",
      },
    ),
  ),
  cache: Type.Optional(
    Strict({
      ttl: Type.Optional(Duration({ default: '1m', description: 'how long a found key is trusted without a lookup; unknown keys are remembered 5 s' })),
    }),
  ),
  ...common,
});

/** `x402` (spec §5 item 1, pay per request): its block is checked in full by the x402 plugin when the strategy compiles. */
const x402 = Strict({
  type: Type.Literal('x402'),
  x402: Type.Object({}, { additionalProperties: true, description: 'pay per request (docs/access.md "Pay per request"), checked by the x402 plugin' }),
  ...common,
});

/** One auth strategy (spec §5.1): `{type, <type>: {...}}`, `database` with its `connector`. */
export const AuthStrategySchema = Type.Union([secret, network, jwt, siwe, database, x402]);

/** `auth` of a project, `admin` or `healthCheck`: any one strategy accepting lets a request in. */
export const AuthConfigSchema = Strict({ strategies: Type.Array(AuthStrategySchema, { description: 'any one accepting lets the request in (spec §5)' }) });

/** A validated auth strategy config (durations already in ms after config resolution). */
export type AuthStrategyConfig = Static<typeof AuthStrategySchema>;
/** A validated `auth` block. */
export type AuthConfig = Static<typeof AuthConfigSchema>;

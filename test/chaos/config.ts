/**
 * The one realistic deployment the hostile suite attacks, as a raw svc config, with the secrets
 * it holds and the fixtures its nodes are seeded with.
 *
 * - Project `main`: open (no auth, like a public RPC), network evm:31337 served by three anvil
 *   nodes `a`, `b`, `c` (config-order selection), consensus (3 slots, 2 must agree) on
 *   `eth_getBalance`, a circuit breaker on every upstream, a Redis-backed rate-limit budget.
 * - Project `gated`: the same nodes behind auth (SIWE with used messages recorded in Redis, API
 *   keys in Redis, a secret, a JWT key), plus a down paid provider whose URL carries credentials
 *   and a zero-config provider whose settings hold keys.
 * - Cache: a memory, a Redis and a PostgreSQL tier, each with finalized, unfinalized and
 *   realtime policies, so every rule about the shared cache is exercised in every tier.
 * - Admin enabled (secret), errors with details, trace logging (every line scanned for secrets).
 */

/** Chain id of the network under attack. */
export const CHAIN = 31337;
/** Path of the open project's network. */
export const MAIN = `/main/evm/${CHAIN}`;
/** Path of the authenticated project's network. */
export const GATED = `/gated/evm/${CHAIN}`;
/** Upstream ids of the anvil nodes, in selection order. */
export const NODE_IDS = ['a', 'b', 'c'] as const;
/** Cache connector ids, one per tier. */
export const TIERS = ['memory-cache', 'redis-cache', 'pg-cache'] as const;
/** One cache tier's connector id. */
export type Tier = (typeof TIERS)[number];
/** SIWE domain the gated project accepts. */
export const SIWE_DOMAIN = 'dapp.chaos.test';
/** Genesis timestamp of every node: with a fixed 1 s block interval the nodes mine identical chains. */
export const GENESIS_TIMESTAMP = 1_700_000_000;
/** Blocks mined at start-up (anvil's `finalized` is 64 behind `latest`). */
export const START_BLOCKS = 120;

/** Runtime code that returns its calldata: CALLDATASIZE PUSH0 PUSH0 CALLDATACOPY CALLDATASIZE PUSH0 RETURN. */
export const ECHO = '0x00000000000000000000000000000000000ec40a';
/** Runtime code that returns CALLVALUE as one word: CALLVALUE PUSH0 MSTORE PUSH1 32 PUSH0 RETURN. */
export const VALUE = '0x000000000000000000000000000000000000ca11';
/** Runtime code that reverts with `Error("nope")` (test/e2e/fixtures.ts). */
export const REVERTER = '0x0000000000000000000000000000000000000bad';
/** Runtime code that emits one empty LOG0: PUSH0 PUSH0 LOG0 STOP. */
export const LOGGER = '0x00000000000000000000000000000000000010c0';
/** Addresses and runtime code installed on every node before the first block is mined. */
export const CONTRACTS: Array<[string, string]> = [
  [ECHO, '0x365f5f37365ff3'],
  [VALUE, '0x345f5260205ff3'],
  [REVERTER, '0x6308c379a060e01b60005260206004526004602452636e6f706560e01b60445260646000fd'],
  [LOGGER, '0x5f5fa000'],
];

/**
 * Credential-looking values of the deployment's config: none may ever appear in an admin answer,
 * an error message, a response header or a log line (docs/production.md "Redaction: what is hidden where").
 */
export const SECRETS = {
  adminSecret: 'chaosAdminSecret5e1f9a3c7b',
  projectSecret: 'chaosProjectSecret2b8d4f6a0c',
  jwtKey: 'chaosJwtSharedKey9c1d3e5f7a0b2c4d',
  upstreamBearer: 'chaosUpstreamBearer7a9b1c3d5e',
  upstreamApiKey: 'chaosUpstreamXApiKey4d6e8f0a2b',
  /** Under a header name that looks like no credential (`X-Chaos-Route`): a header value all the same. */
  upstreamRoute: 'chaosUpstreamRouteValue9e1f3a5b',
  vendorPassword: 'chaosVendorUserinfoPw3e5f7a9b',
  vendorPathKey: 'chaosVendorPathKey8b0c2d4e6f',
  vendorQueryKey: 'chaosVendorQueryKey1f3a5b7c9d',
  providerKey: 'chaosProviderApiKey6c8d0e2f4a',
  providerSecret: 'chaosProviderClientSecret0a2b4c',
  exporterToken: 'chaosExporterToken5b7c9d1e3f',
  postgresPassword: 'chaosPostgresPassword2c4e6a8b',
} as const;

/** Storage breakers fast enough for a test to see every edge within seconds. */
export const STORAGE_BREAKER = { backoff: '500ms', maxBackoff: '1s' };
/** Upstream breaker: opens after 5 charged failures among the last 20 outcomes (and stays open). */
export const UPSTREAM_BREAKER = { failureThresholdCount: 5, failureThresholdCapacity: 20, halfOpenAfter: '5m' };

/** What the config is built from: the servers the deployment started. */
export interface DeploymentServers {
  /** Node URLs in {@link NODE_IDS} order. */
  nodeUrls: string[];
  redisUrl: string;
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust auth: any password is accepted). */
  postgresUrl: string;
  /** A loopback port nothing listens on (the down provider). */
  closedPort: number;
}

/**
 * The raw config of the deployment (as a YAML file would hold it).
 * @param s the servers started for it
 */
export function deploymentConfig(s: DeploymentServers): Record<string, unknown> {
  // Trust auth ignores the password, so the connection string can carry one to be redacted.
  const pgUri = s.postgresUrl.replace('postgres@', `postgres:${SECRETS.postgresPassword}@`);
  const redis = (extra: Record<string, unknown> = {}) => ({ uri: s.redisUrl, breaker: STORAGE_BREAKER, ...extra });
  const tiers = [
    { id: 'memory-cache', driver: 'memory', memory: { maxItems: 100_000, maxTotalSize: '64MiB' } },
    { id: 'redis-cache', driver: 'redis', redis: redis() },
    { id: 'pg-cache', driver: 'postgresql', postgresql: { connectionUri: pgUri, table: 'chaos_cache', breaker: STORAGE_BREAKER } },
  ];
  const policies = tiers.flatMap((t) => [
    { connector: t.id, finality: 'finalized' },
    { connector: t.id, finality: 'unfinalized', ttl: '60s' },
    { connector: t.id, finality: 'realtime', ttl: '60s' },
  ]);
  const network = {
    architecture: 'evm',
    evm: { chainId: CHAIN },
    selectionPolicy: { evalInterval: '1h' },
    failsafe: [
      { matchMethod: 'eth_getBalance', timeout: { duration: '10s' }, consensus: { maxParticipants: 3, agreementThreshold: 2 } },
      { matchMethod: '*', timeout: { duration: '10s' } },
    ],
  };
  const upstreamDefaults = { failsafe: [{ matchMethod: '*', timeout: { duration: '10s' }, circuitBreaker: UPSTREAM_BREAKER }] };
  const nodes = s.nodeUrls.map((url, i) => ({
    id: NODE_IDS[i],
    endpoint: url,
    evm: { chainId: CHAIN, statePollerInterval: '100ms' },
    // anvil ignores these; they are the credentials a paid provider would want.
    jsonRpc: { headers: { authorization: `Bearer ${SECRETS.upstreamBearer}`, 'X-Api-Key': SECRETS.upstreamApiKey, 'X-Chaos-Route': SECRETS.upstreamRoute } },
  }));
  return {
    logLevel: 'trace',
    server: { includeErrorDetails: true },
    tracing: { enabled: false, headers: { authorization: `Bearer ${SECRETS.exporterToken}` } },
    admin: { auth: { strategies: [{ type: 'secret', secret: { value: SECRETS.adminSecret } }] } },
    rateLimiters: {
      store: { driver: 'redis', redis: redis() },
      budgets: [{ id: 'roomy', rules: [{ method: '*', maxCount: 1_000_000, period: 'second' }] }],
    },
    database: { evmJsonRpcCache: { connectors: tiers, policies } },
    projects: [
      { id: 'main', rateLimitBudget: 'roomy', networks: [network], upstreamDefaults, upstreams: nodes },
      {
        id: 'gated',
        networks: [network],
        upstreamDefaults,
        upstreams: [
          {
            id: 'vendor',
            endpoint: `http://chaos:${SECRETS.vendorPassword}@127.0.0.1:${s.closedPort}/v2/${SECRETS.vendorPathKey}?apikey=${SECRETS.vendorQueryKey}`,
            evm: { chainId: CHAIN },
          },
          ...nodes,
        ],
        providers: [
          {
            id: 'hyper',
            vendor: 'hyper',
            settings: { apiKey: SECRETS.providerKey, nested: { clientSecret: SECRETS.providerSecret } },
            onlyNetworks: ['evm:999999'],
          },
        ],
        auth: {
          strategies: [
            // Used messages go to the API keys' Redis (the same tier).
            { type: 'siwe', siwe: { allowedDomains: [SIWE_DOMAIN] } },
            { type: 'database', connector: { id: 'keys', driver: 'redis', redis: redis({ keyPrefix: 'chaos_auth:' }) } },
            { type: 'secret', secret: { value: SECRETS.projectSecret, id: 'ops' } },
            { type: 'jwt', jwt: { allowedAlgorithms: ['HS256'], verificationKeys: { shared: SECRETS.jwtKey } } },
          ],
        },
      },
    ],
  };
}

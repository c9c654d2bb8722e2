/**
 * Raw and resolved config types (keep them separate).
 *
 * Raw config is what users write: durations as strings, defaults absent, tri-state booleans
 * unset. Resolved config has `networkDefaults`/`upstreamDefaults` merged, schema defaults
 * applied, durations in milliseconds and sizes in bytes. Plugin-owned keys are carried in
 * each resolved node's `settings` (merged, defaulted, converted) for the plugin to read.
 */

/**
 * Resolved request directives (spec §2.8), by field: what the directives plugin resolved for a
 * call from config defaults and the request (unset means "the honouring plugin's default", so
 * tri-state config survives resolution). The core names no directive: each plugin declares the
 * ones it honours and reads them with a typed `Directive` (`svc-proxy/plugins/directives`). Declared
 * with the config because `directiveDefaults` resolve to it.
 */
export interface Directives {
  /** A declared directive's value, by its field name. */
  [field: string]: boolean | string | undefined;
}

/** One config problem: a path such as `projects[0].upstreams[1].endpoint` and a message. */
export interface ConfigProblem {
  path: string;
  message: string;
}

/** Duration as written: `"50ms"`, `"15s"`, `"1h"`, or milliseconds. */
export type DurationInput = string | number;

/** Raw upstream entry (core keys; plugins add more). */
export interface UpstreamInput {
  id?: string;
  endpoint?: string;
  vendorName?: string;
  evm?: { chainId?: number; [k: string]: unknown };
  ignoreMethods?: string[];
  allowMethods?: string[];
  tags?: string[];
  jsonRpc?: { headers?: Record<string, string> };
  [k: string]: unknown;
}

/** Raw network entry (core keys; plugins add more). */
export interface NetworkInput {
  architecture?: 'evm';
  evm?: { chainId?: number; [k: string]: unknown };
  alias?: string;
  directiveDefaults?: Record<string, unknown>;
  allowClientDirectives?: string;
  [k: string]: unknown;
}

/** Raw project entry. */
export interface ProjectInput {
  id: string;
  networks?: NetworkInput[];
  upstreams?: UpstreamInput[];
  networkDefaults?: NetworkInput;
  upstreamDefaults?: UpstreamInput;
  allowClientDirectives?: string;
  [k: string]: unknown;
}

/** Raw config as users write it in YAML, JSON or `defineConfig({...})`. */
export interface SvcConfigInput {
  logLevel?: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  preset?: string;
  server?: {
    httpHost?: string;
    httpPort?: number;
    httpHostV4?: string;
    httpPortV4?: number;
    maxTimeout?: DurationInput;
    maxBodySize?: number | string;
    maxResponseBytesInFlight?: number | string;
    enableGzip?: boolean;
    maxBatchSize?: number;
    batchConcurrency?: number;
    includeErrorDetails?: boolean;
    executionHeaders?: 'all' | 'summary' | 'off';
    responseHeaders?: Record<string, string>;
    /** Drain window after SIGTERM while still serving (spec §3.2), default 15s. */
    waitBeforeShutdown?: DurationInput;
    /** Worker processes: a count (1..256) or `auto` (available parallelism). Default 1. */
    workers?: number | 'auto';
    /** Drain window for in-flight calls once new requests are refused (spec §3.2), default 10s. */
    waitAfterShutdown?: DurationInput;
    aliasing?: { rules?: AliasRule[] };
    /** IPs or CIDRs of trusted proxies in front of svc. */
    trustedIPForwarders?: string[];
    /** Headers naming the client behind a trusted forwarder, default `['X-Forwarded-For']`. */
    trustedIPHeaders?: string[];
    /** HTTPS (and WSS) on the proxy port: PEM files read at start; `caFile` requires client certificates (mutual TLS). */
    tls?: { enabled?: boolean; certFile?: string; keyFile?: string; caFile?: string };
    [k: string]: unknown;
  };
  /** Named outbound proxy pools (`http://`, `https://`, `socks5://` URLs) that `upstreams[].jsonRpc.proxyPool` refers to. */
  proxyPools?: Array<{ id: string; urls: string[] }>;
  /** The metrics listener; plugins add keys (the metrics plugin's histogram options). */
  metrics?: { enabled?: boolean; host?: string; hostV4?: string; port?: number; [k: string]: unknown };
  projects?: ProjectInput[];
  [k: string]: unknown;
}

/** One aliasing rule (spec §4.1 alias forms). */
export interface AliasRule {
  /** Glob matched against the Host header (port stripped). */
  matchDomain: string;
  /** Project served. */
  serveProject: string;
  /** Architecture served (`evm`), letting the path omit it. */
  serveArchitecture?: 'evm';
  /** Chain served, letting the path be `/`. */
  serveChain?: string | number;
}

/** Resolved `server` block. */
export interface ResolvedServer {
  httpHost: string;
  httpPort: number;
  /** Deadline of one call, ms. */
  maxTimeoutMs: number;
  /** Largest accepted body, bytes (after decompression). */
  maxBodySize: number;
  /** Most bytes of upstream answers read and parsed at once, over every upstream (global bound on response bytes in flight). */
  maxResponseBytesInFlight: number;
  /** Gzip answers over 1 KiB for clients that accept it. */
  enableGzip: boolean;
  maxBatchSize: number;
  batchConcurrency: number;
  /** Deepest JSON nesting of one request object. */
  maxJsonDepth: number;
  /** Time for a request's headers and body to arrive, ms; 0 = none. */
  readTimeoutMs: number;
  /** Idle keep-alive time of client connections, ms. */
  keepAliveTimeoutMs: number;
  /** Drain: time from SIGTERM until new requests are refused (the healthcheck is 503 throughout), ms (spec §3.2). */
  waitBeforeShutdownMs: number;
  /** Drain: longest wait for in-flight requests once new ones are refused, ms (spec §3.2). */
  waitAfterShutdownMs: number;
  /** Most client connections at once (per worker); 0 = unlimited. */
  maxConnections: number;
  /** Worker processes serving the proxy port (`auto` resolved to available parallelism); 1 = a single process. */
  workers: number;
  includeErrorDetails: boolean;
  executionHeaders: 'all' | 'summary' | 'off';
  /** Static headers, already `${ENV}`-expanded. */
  responseHeaders: Record<string, string>;
  aliasing: { rules: AliasRule[] };
  /** IPs or CIDRs of trusted proxies; empty: forwarding headers are never read. */
  trustedIPForwarders: string[];
  /** Forwarding headers read behind a trusted forwarder, in order. */
  trustedIPHeaders: string[];
  /** TLS of the proxy port when `server.tls.enabled`; undefined: plain HTTP. */
  tls?: ResolvedServerTls;
  /** Plugin-owned `server.*` keys, defaulted and converted. */
  settings: Record<string, unknown>;
}

/** Resolved `server.tls` (enabled): the PEM files svc reads when it starts listening. */
export interface ResolvedServerTls {
  /** Certificate chain file path (PEM, leaf first). */
  certFile: string;
  /** Private key file path (PEM). */
  keyFile: string;
  /** CA certificates file path (PEM); set: clients must present a certificate signed by one of them (mutual TLS). */
  caFile?: string;
}

/** Resolved `metrics` block. */
export interface ResolvedMetrics {
  enabled: boolean;
  host: string;
  port: number;
  /** The whole `metrics` block, defaulted: plugin-owned keys (histogram options) included. */
  settings: Record<string, unknown>;
}

/** Resolved upstream. */
export interface ResolvedUpstream {
  id: string;
  endpoint: string;
  /** `vendorName` or `unknown`. */
  vendor: string;
  /** Configured chain id, if any. */
  chainId?: number;
  ignoreMethods: string[];
  allowMethods: string[];
  tags: string[];
  headers: Record<string, string>;
  /** The whole merged entry (upstreamDefaults + upstream), defaulted, durations in ms. */
  settings: Record<string, unknown>;
}

/** Resolved network. */
export interface ResolvedNetwork {
  /** `evm:<chainId>`. */
  id: string;
  architecture: 'evm';
  chainId: number;
  alias?: string;
  /** Config directive defaults (spec §2.8), tri-state kept. */
  directiveDefaults: Directives;
  /** Network-level `allowClientDirectives`, if set. */
  allowClientDirectives?: string;
  /** The whole merged entry (networkDefaults + network), defaulted, durations in ms. */
  settings: Record<string, unknown>;
}

/** Resolved project. */
export interface ResolvedProject {
  id: string;
  networks: ResolvedNetwork[];
  upstreams: ResolvedUpstream[];
  allowClientDirectives?: string;
  /** Raw `networkDefaults`, used to create networks on demand. */
  networkDefaults: NetworkInput;
  /** Raw `upstreamDefaults`, used for upstreams added at run time. */
  upstreamDefaults: UpstreamInput;
  /** Project-level plugin keys, defaulted and converted. */
  settings: Record<string, unknown>;
}

/** The whole resolved config held by a running proxy. */
export interface ResolvedConfig {
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  preset?: string;
  server: ResolvedServer;
  metrics: ResolvedMetrics;
  projects: ResolvedProject[];
  /** `proxyPools` by id: each pool's proxy URLs, in order (empty when none is configured). */
  proxyPools?: ReadonlyMap<string, readonly string[]>;
  /** Top-level plugin keys (admin, healthCheck, database...), defaulted and converted. */
  settings: Record<string, unknown>;
  /** Warnings collected while loading (unset env vars...), logged at start-up. */
  warnings: string[];
}

/**
 * The transport of one BDS upstream (`grpc://`, `grpc+bds://`, `grpcs://`): a small round-robin pool of gRPC channels
 * (@grpc/grpc-js), each JSON-RPC call translated to one unary BDS call (./requests.ts) and its answer to the JSON-RPC result an
 * HTTP node gives (./to-json.ts), every failure named as an svc upstream error (./errors.ts). What eRPC's client does
 * (clients/grpc_bds_client.go, grpc_bds_resilience.go), where svc keeps it:
 *
 * - TLS for `grpcs`, a scheme containing `tls`, or port 443 (system CAs); plaintext otherwise; port 50051 when none is given.
 * - `grpc.headers` sent as metadata on every call.
 * - Messages capped at 100 MiB each way (eRPC's caps), and an answer at the upstream's `maxResponseSize` (or a call's smaller cap).
 * - Each call's deadline is svc's attempt deadline, capped at 20 s (eRPC's hard cap); the attempt's abort cancels the call.
 * - `grpc.poolSize` channels (eRPC's default 3), each with its own connection, taken in turn: one wedged HTTP/2 connection stalls
 *   only its share of calls. eRPC's watchdog that replaces a connection after repeated hard-cap timeouts is not copied: svc's
 *   circuit breaker and health score move traffic off a stalling upstream, and grpc-js reconnects a broken connection itself.
 * - No gRPC-level retries and no wait-for-ready: a call on a down connection fails at once (UNAVAILABLE) and svc's own
 *   failsafe (retry, next upstream) decides what happens next.
 */
import { Client, credentials, Metadata, status as Status, type ChannelCredentials, type ServiceError } from '@grpc/grpc-js';
import type { ResolvedUpstream } from 'svc-proxy/plugin';
import { isDeadline, type TransportRequest, type UpstreamTransport } from 'svc-proxy/plugin/contracts';
import { ErrCancelled, ErrEndpointRequestTimeout, ErrEndpointUnsupported, ErrUpstreamMalformedResponse, SvcError } from 'svc-proxy/plugin/errors';
import { RpcResult } from 'svc-proxy/plugin';
import { bdsErrorOf, codecOf } from './proto.ts';
import { errorOfStatus } from './errors.ts';
import { planCall, Unservable } from './requests.ts';
import { MalformedModel } from './to-json.ts';

/** eRPC's per-call hard cap, ms. */
export const HARD_CALL_TIMEOUT_MS = 20_000;
/** eRPC's message size caps (receive and send), bytes. */
export const MAX_MESSAGE_BYTES = 100 * 1024 * 1024;
/** eRPC's default number of connections per upstream. */
export const DEFAULT_POOL_SIZE = 3;
/** The port of an endpoint that names none. */
export const DEFAULT_PORT = 50051;

/** Where and how to connect, from the endpoint URL. */
export interface BdsTarget {
  /** `host:port` (IPv6 hosts in brackets). */
  address: string;
  /** TLS (system CAs) or plaintext. */
  tls: boolean;
}

/**
 * The address and TLS choice of an endpoint, as eRPC picks them.
 * @param endpoint `grpc://host[:port]`, `grpc+bds://…`, `grpcs://…`
 * @throws TypeError when the endpoint is not a URL with a host
 */
export function targetOf(endpoint: string): BdsTarget {
  const u = new URL(endpoint);
  if (!u.hostname) throw new TypeError(`endpoint ${u.protocol}// has no host`);
  const scheme = u.protocol.slice(0, -1).toLowerCase();
  const port = u.port ? Number(u.port) : DEFAULT_PORT;
  return { address: `${u.hostname}:${port}`, tls: port === 443 || scheme.startsWith('grpcs') || scheme.includes('tls') };
}

/** The plugin settings of one upstream (`grpc`, resolved). */
export interface BdsSettings {
  /** Metadata sent on every call (lower-cased names). */
  headers: Record<string, string>;
  /** Channels kept open, each its own connection. */
  poolSize: number;
}

/** A gRPC answer's bytes too large for the call's cap. */
class TooLarge extends Error {}

/** A BDS upstream's {@link UpstreamTransport}. */
export class BdsTransport implements UpstreamTransport {
  readonly secrets: readonly string[];
  private readonly clients: Client[] = [];
  private next = 0;
  private readonly inFlight = new Set<{ cancel(): void }>();
  private readonly metadata: Metadata;
  private readonly target: BdsTarget;
  private readonly id: string;
  private readonly chainId: number | undefined;

  /**
   * Creates the channels (they connect on first use).
   * @param upstream the resolved upstream (endpoint, id, configured chain id, `maxResponseSize`)
   * @param settings its `grpc` settings
   * @param creds overrides the TLS choice's credentials (tests: a private CA)
   */
  constructor(upstream: ResolvedUpstream, settings: BdsSettings, creds?: ChannelCredentials) {
    this.id = upstream.id;
    this.chainId = upstream.chainId;
    this.target = targetOf(upstream.endpoint);
    this.metadata = new Metadata();
    for (const [k, v] of Object.entries(settings.headers)) this.metadata.set(k.toLowerCase(), v);
    this.secrets = Object.values(settings.headers).filter((v) => v.length >= 8);
    const maxResponse = typeof upstream.settings.maxResponseSize === 'number' ? upstream.settings.maxResponseSize : MAX_MESSAGE_BYTES;
    const options = {
      'grpc.max_receive_message_length': Math.min(MAX_MESSAGE_BYTES, maxResponse),
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 5_000,
      'grpc.keepalive_permit_without_calls': 1,
      // Each channel its own connection: grpc-js would otherwise share one subchannel between them.
      'grpc.use_local_subchannel_pool': 1,
      'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
    };
    const channelCreds = creds ?? (this.target.tls ? credentials.createSsl() : credentials.createInsecure());
    for (let i = 0; i < Math.max(1, settings.poolSize); i++) this.clients.push(new Client(this.target.address, channelCreds, options));
  }

  /** Sends one JSON-RPC call as a BDS call (see the module comment); rejects with an SvcError only. */
  async send(req: TransportRequest): Promise<RpcResult> {
    let plan: ReturnType<typeof planCall>;
    try {
      plan = planCall(req.method, req.params, this.chainId);
    } catch (e) {
      if (!(e instanceof Unservable)) throw e;
      throw new ErrEndpointUnsupported(`upstream ${this.id} (BDS gRPC) cannot serve ${req.method.slice(0, 64)}: ${e.message}`, {
        details: { upstream: this.id, method: req.method.slice(0, 64) },
      });
    }
    const response = await this.unary(plan.rpc, plan.request, req);
    let result: unknown;
    try {
      result = plan.answer(response);
    } catch (e) {
      if (!(e instanceof MalformedModel)) throw e;
      throw this.malformed(req.method, e.message);
    }
    const text = JSON.stringify(result);
    // The JSON is about twice the protobuf's size (hex): the cap holds for what svc keeps, not only for what it read.
    if (text.length > req.maxResponseSize) throw this.malformed(req.method, `answer larger than ${req.maxResponseSize} bytes as JSON`);
    const r = new RpcResult(result, text, [0, text.length]);
    r.upstreamId = this.id;
    return r;
  }

  private malformed(method: string, why: string): SvcError {
    return new ErrUpstreamMalformedResponse(`upstream ${this.id} (BDS gRPC) answered ${method.slice(0, 64)} with a malformed message: ${why}`, {
      details: { upstream: this.id },
    });
  }

  /** One unary call on the next channel: bounded in time and size, cancelled with the attempt. */
  private unary(rpc: Parameters<typeof codecOf>[0], request: Record<string, unknown>, req: TransportRequest): Promise<Record<string, unknown>> {
    const codec = codecOf(rpc);
    const signal = req.signal;
    if (signal.aborted) return Promise.reject(this.aborted(signal));
    const client = this.clients[this.next++ % this.clients.length] as Client;
    const deadline = Math.min(req.deadline ?? Number.POSITIVE_INFINITY, Date.now() + HARD_CALL_TIMEOUT_MS);
    let undecodable: string | undefined;
    const decode = (bytes: Buffer): Record<string, unknown> => {
      if (bytes.length > req.maxResponseSize) throw new TooLarge();
      try {
        return codec.decode(bytes);
      } catch (e) {
        undecodable = (e as Error).message;
        throw e;
      }
    };
    return new Promise((resolve, reject) => {
      let tooLarge = false;
      const call = client.makeUnaryRequest(
        codec.path,
        (o: Record<string, unknown>) => codec.encode(o),
        (b: Buffer) => {
          try {
            return decode(b);
          } catch (e) {
            if (e instanceof TooLarge) tooLarge = true;
            throw e;
          }
        },
        request,
        this.metadata,
        { deadline },
        (err: ServiceError | null, res?: Record<string, unknown>) => {
          this.inFlight.delete(call);
          signal.removeEventListener('abort', onAbort);
          if (!err && res) return resolve(res);
          if (signal.aborted) return reject(this.aborted(signal));
          if (tooLarge) return reject(this.malformed(req.method, `answer larger than ${req.maxResponseSize} bytes`));
          if (undecodable !== undefined) return reject(this.malformed(req.method, `not a ${rpc} response (${undecodable.slice(0, 100)})`));
          const e = err as ServiceError;
          if (e.code === Status.RESOURCE_EXHAUSTED && /larger than max/i.test(e.details ?? ''))
            return reject(this.malformed(req.method, `answer larger than the ${Math.min(MAX_MESSAGE_BYTES, req.maxResponseSize)}-byte cap`));
          const bin = e.metadata?.get('grpc-status-details-bin')[0];
          const bds = bdsErrorOf(Buffer.isBuffer(bin) ? bin : undefined);
          reject(errorOfStatus(e, bds, this.id, req.method, (t) => this.redact(t)));
        },
      );
      this.inFlight.add(call);
      const onAbort = () => call.cancel();
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The error of a call its attempt aborted: a deadline is a timeout, a hedge loss or a client leaving a cancellation. */
  private aborted(signal: AbortSignal): SvcError {
    const r: unknown = signal.reason;
    if (r instanceof SvcError) return r;
    if (isDeadline(r))
      return new ErrEndpointRequestTimeout(`upstream ${this.id} (BDS gRPC) did not answer before the deadline`, { details: { upstream: this.id } });
    return new ErrCancelled(`request to upstream ${this.id} (BDS gRPC) was cancelled`, { details: { upstream: this.id } });
  }

  private redact(text: string): string {
    let t = text;
    for (const s of this.secrets) t = t.split(s).join('[REDACTED]');
    return t;
  }

  /** Closes the channels; calls in flight finish. */
  async close(): Promise<void> {
    for (const c of this.clients) c.close();
  }

  /** Cancels calls in flight and closes the channels. */
  async destroy(): Promise<void> {
    for (const call of this.inFlight) call.cancel();
    this.inFlight.clear();
    await this.close();
  }
}

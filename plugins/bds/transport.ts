/**
 * The transport of one BDS upstream (`grpc://`, `grpc+bds://`, `grpcs://`): a small round-robin pool of gRPC channels
 * (@grpc/grpc-js), each JSON-RPC call translated to one unary BDS call (./requests.ts) and its answer to the JSON-RPC result an
 * HTTP node gives (./to-json.ts), every failure named as an svc upstream error (./errors.ts). What eRPC's client does
 * (clients/grpc_bds_client.go, grpc_bds_resilience.go), where svc keeps it:
 *
 * - TLS for `grpcs`, a scheme containing `tls`, or port 443 (system CAs); plaintext otherwise; port 50051 when none is given.
 * - `grpc.headers` sent as metadata on every call (./metadata.ts).
 * - Requests capped at 100 MiB (eRPC's cap). An answer is read within `grpc.maxMessageSize` (32 MiB by default, at most eRPC's 100 MiB)
 *   and the upstream's `maxResponseSize`; before it is decoded, its least JSON size (./size.ts) must fit the call's cap and its bytes
 *   must fit the process's response-bytes budget (`server.maxResponseBytesInFlight`), where they stay counted until the answer is
 *   converted. Lists (logs, block receipts) are decoded and converted an entry at a time, yielding to the event loop every
 *   {@link CONVERT_SLICE} entries: the attempt's deadline or cancellation stops a long conversion, the JSON is held to the cap as
 *   it grows, and the result is kept as its JSON alone (a plugin that reads it parses it, as for an HTTP answer).
 * - Each call's deadline is svc's attempt deadline, capped at 20 s (eRPC's hard cap); the attempt's abort cancels the call.
 * - `grpc.poolSize` channels (eRPC's default 3), each with its own connection, taken in turn: one wedged HTTP/2 connection stalls
 *   only its share of calls. eRPC's watchdog that replaces a connection after repeated hard-cap timeouts is not copied: svc's
 *   circuit breaker and health score move traffic off a stalling upstream, and grpc-js reconnects a broken connection itself.
 * - No gRPC-level retries and no wait-for-ready: a call on a down connection fails at once (UNAVAILABLE) and svc's own
 *   failsafe (retry, next upstream) decides what happens next.
 * - Only svc's own abort (the attempt's signal, `destroy()`) is a cancellation; a `CANCELLED` status from the other side is an
 *   upstream fault (./errors.ts).
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Client, credentials, type Metadata, status as Status, type ChannelCredentials, type ServiceError } from '@grpc/grpc-js';
import type { ResolvedUpstream } from 'svc-proxy/plugin';
import { isDeadline, responseBytes, type TransportRequest, type UpstreamTransport } from 'svc-proxy/plugin/contracts';
import {
  ErrCancelled,
  ErrEndpointClientSideException,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrEndpointUnsupported,
  ErrResponseBytesInFlightExceeded,
  ErrUpstreamMalformedResponse,
  SvcError,
} from 'svc-proxy/plugin/errors';
import { RpcResult } from 'svc-proxy/plugin';
import { bdsErrorOf, codecOf, entriesOf, Undecodable } from './proto.ts';
import { ErrEndpointParamsUnsupported, errorOfStatus } from './errors.ts';
import { metadataOf } from './metadata.ts';
import { type BdsPlan, InvalidParams, planCall, Unservable } from './requests.ts';
import { minJsonSize } from './size.ts';
import { MalformedModel } from './to-json.ts';

/** eRPC's per-call hard cap, ms. */
export const HARD_CALL_TIMEOUT_MS = 20_000;
/** eRPC's message size cap (receive and send), bytes: svc's send cap and the ceiling of `grpc.maxMessageSize`. */
export const MAX_MESSAGE_BYTES = 100 * 1024 * 1024;
/** Default `grpc.maxMessageSize`, bytes: below eRPC's cap, since an answer's JSON and objects take several times its bytes. */
export const DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024;
/** eRPC's default number of connections per upstream. */
export const DEFAULT_POOL_SIZE = 3;
/** The port of an endpoint that names none. */
export const DEFAULT_PORT = 50051;
/** List entries (logs, receipts) converted between two turns of the event loop: a few milliseconds of work. */
export const CONVERT_SLICE = 1000;

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
  /** Metadata sent on every call (names lower-cased when sent). */
  headers: Record<string, string>;
  /** Channels kept open, each its own connection. */
  poolSize: number;
  /** Largest answer message received, bytes (`grpc.maxMessageSize`; the upstream's `maxResponseSize` caps it too). Default {@link DEFAULT_MAX_MESSAGE_BYTES}. */
  maxMessageSize?: number;
}

/** Why an answer's bytes were refused before decoding. */
type Refusal = { tooLarge: string } | { overBudget: true };

/** Response bytes taken from the process's budget for one call, released by {@link BdsTransport.send} once the answer is converted. */
interface Held {
  bytes: number;
}

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
  /** Largest answer message received, bytes. */
  readonly maxMessageSize: number;
  private closed = false;
  private destroyed = false;

  /**
   * Creates the channels (they connect on first use).
   * @param upstream the resolved upstream (endpoint, id, configured chain id, `maxResponseSize`)
   * @param settings its `grpc` settings
   * @param creds overrides the TLS choice's credentials (tests: a private CA)
   * @throws TypeError when a header cannot be sent as metadata (naming the header, not its value; the config schema refuses these first)
   */
  constructor(upstream: ResolvedUpstream, settings: BdsSettings, creds?: ChannelCredentials) {
    this.id = upstream.id;
    this.chainId = upstream.chainId;
    this.target = targetOf(upstream.endpoint);
    this.metadata = metadataOf(settings.headers);
    this.secrets = Object.values(settings.headers).filter((v) => v.length >= 8);
    const maxResponse = typeof upstream.settings.maxResponseSize === 'number' ? upstream.settings.maxResponseSize : MAX_MESSAGE_BYTES;
    this.maxMessageSize = Math.min(MAX_MESSAGE_BYTES, maxResponse, settings.maxMessageSize ?? DEFAULT_MAX_MESSAGE_BYTES);
    const options = {
      'grpc.max_receive_message_length': this.maxMessageSize,
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
    const plan = this.plan(req);
    const held: Held = { bytes: 0 };
    try {
      const bytes = await this.unary(plan, req, held);
      return await this.convert(plan, bytes, req);
    } finally {
      if (held.bytes > 0) responseBytes.release(held.bytes);
    }
  }

  /** The BDS call of a request, or the error that refuses it before anything is sent. */
  private plan(req: TransportRequest): BdsPlan {
    const method = req.method.slice(0, 64);
    try {
      return planCall(req.method, req.params, this.chainId);
    } catch (e) {
      const details = { upstream: this.id, method };
      if (e instanceof InvalidParams) throw new ErrEndpointClientSideException(e.message, { details });
      if (!(e instanceof Unservable)) throw e;
      const cls = e.kind === 'method' ? ErrEndpointUnsupported : ErrEndpointParamsUnsupported;
      throw new cls(`upstream ${this.id} (BDS gRPC) cannot serve ${method}: ${e.message}`, { details });
    }
  }

  /**
   * The answer's bytes as the JSON-RPC result. A list is decoded and converted an entry at a time, yielding to the event loop every
   * {@link CONVERT_SLICE} entries (the attempt's abort stops it there) and held to the call's cap as its JSON grows; its result is
   * kept as that JSON only (parsed again only if a plugin reads it), not as a second tree of objects.
   */
  private async convert(plan: BdsPlan, bytes: Buffer, req: TransportRequest): Promise<RpcResult> {
    const codec = codecOf(plan.rpc);
    const answer = plan.answer;
    let r: RpcResult;
    try {
      if ('one' in answer) {
        let response: Record<string, unknown>;
        try {
          response = codec.decode(bytes);
        } catch (e) {
          throw new Undecodable((e as Error).message);
        }
        const result = answer.one(response);
        const text = JSON.stringify(result);
        if (text.length > req.maxResponseSize) throw this.tooLarge(req, `${text.length} bytes as JSON`);
        r = new RpcResult(result, text, [0, text.length]);
      } else {
        const parts: string[] = [];
        let size = 2;
        for (const entry of entriesOf(codec.responseType, bytes, answer.many)) {
          if (parts.length > 0 && parts.length % CONVERT_SLICE === 0) {
            await nextTurn();
            if (req.signal.aborted) throw this.aborted(req.signal);
          }
          const t = JSON.stringify(answer.each(entry));
          size += t.length + 1;
          if (size > req.maxResponseSize) throw this.tooLarge(req, `over ${req.maxResponseSize} bytes as JSON`);
          parts.push(t);
        }
        r = RpcResult.lazy(`[${parts.join(',')}]`);
      }
    } catch (e) {
      if (e instanceof SvcError) throw e;
      if (e instanceof MalformedModel) throw this.malformed(req.method, e.message);
      if (e instanceof Undecodable) throw this.malformed(req.method, `not a ${plan.rpc} response (${e.message.slice(0, 100)})`);
      throw this.malformed(req.method, `unreadable (${String((e as Error)?.message ?? e).slice(0, 100)})`);
    }
    r.upstreamId = this.id;
    return r;
  }

  private malformed(method: string, why: string): SvcError {
    return new ErrUpstreamMalformedResponse(`upstream ${this.id} (BDS gRPC) answered ${method.slice(0, 64)} with a malformed message: ${why}`, {
      details: { upstream: this.id },
    });
  }

  private tooLarge(req: TransportRequest, size: string): SvcError {
    return new ErrUpstreamMalformedResponse(
      `upstream ${this.id} (BDS gRPC) answered ${req.method.slice(0, 64)} larger than maxResponseSize (${req.maxResponseSize} bytes; ${size})`,
      { details: { upstream: this.id, maxResponseSize: req.maxResponseSize } },
    );
  }

  /**
   * Takes an answer's bytes from grpc-js (its deserializer: decoding waits for {@link convert}): refused when their least JSON
   * size passes the call's cap, else counted in the response-bytes budget.
   * @throws Error (to grpc-js, which fails the call) with the refusal recorded in `refused`
   */
  private take(bytes: Buffer, plan: BdsPlan, req: TransportRequest, held: Held, refused: { why?: Refusal }): Buffer {
    const least = minJsonSize(codecOf(plan.rpc).responseType, bytes);
    if (least > req.maxResponseSize) refused.why = { tooLarge: `${bytes.length} bytes of protobuf, at least ${least} bytes as JSON` };
    else if (!responseBytes.take(bytes.length)) refused.why = { overBudget: true };
    else {
      held.bytes += bytes.length;
      return bytes;
    }
    throw new Error('answer refused');
  }

  /** One unary call on the next channel: bounded in time and size, cancelled with the attempt. */
  private unary(plan: BdsPlan, req: TransportRequest, held: Held): Promise<Buffer> {
    const codec = codecOf(plan.rpc);
    const signal = req.signal;
    if (signal.aborted) return Promise.reject(this.aborted(signal));
    if (this.closed) return Promise.reject(this.closedError());
    const client = this.clients[this.next++ % this.clients.length] as Client;
    const deadline = Math.min(req.deadline ?? Number.POSITIVE_INFINITY, Date.now() + HARD_CALL_TIMEOUT_MS);
    const refused: { why?: Refusal } = {};
    return new Promise((resolve, reject) => {
      const onAbort = () => call?.cancel();
      let call: ReturnType<Client['makeUnaryRequest']> | undefined;
      try {
        call = client.makeUnaryRequest(
          codec.path,
          (o: Record<string, unknown>) => codec.encode(o),
          (b: Buffer) => this.take(b, plan, req, held, refused),
          plan.request,
          this.metadata,
          { deadline },
          (err: ServiceError | null, res?: Buffer) => {
            if (call) this.inFlight.delete(call);
            signal.removeEventListener('abort', onAbort);
            if (!err && res) return resolve(res);
            reject(this.failure(err as ServiceError, req, refused.why));
          },
        );
      } catch {
        // grpc-js throws from a closed channel ("Channel has been shut down"): a raw Error must not leave the transport.
        return reject(this.closedError());
      }
      this.inFlight.add(call);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The svc error of a failed call: svc's own abort first, then what svc refused of the answer, then the remote status. */
  private failure(e: ServiceError, req: TransportRequest, why: Refusal | undefined): SvcError {
    if (req.signal.aborted) return this.aborted(req.signal);
    if (this.destroyed)
      return new ErrCancelled(`request to upstream ${this.id} (BDS gRPC) was cancelled: the upstream was closed`, { details: { upstream: this.id } });
    if (why && 'tooLarge' in why) return this.tooLarge(req, why.tooLarge);
    if (why && 'overBudget' in why) {
      return new ErrResponseBytesInFlightExceeded(
        `svc is reading ${responseBytes.inFlight} bytes of upstream answers, at server.maxResponseBytesInFlight (${responseBytes.limit} bytes); retry later`,
        { details: { maxResponseBytesInFlight: responseBytes.limit } },
      );
    }
    if (e.code === Status.RESOURCE_EXHAUSTED && /larger than max/i.test(e.details ?? ''))
      return this.tooLarge(req, `over the receive cap of ${this.maxMessageSize} bytes of protobuf: grpc.maxMessageSize or maxResponseSize`);
    const bin = e.metadata?.get('grpc-status-details-bin')[0];
    const bds = bdsErrorOf(Buffer.isBuffer(bin) ? bin : undefined);
    return errorOfStatus(e, bds, this.id, req.method, (t) => this.redact(t));
  }

  private closedError(): SvcError {
    return new ErrEndpointServerSideException(`upstream ${this.id} (BDS gRPC) is closed`, { details: { upstream: this.id } });
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

  /** Closes the channels; calls in flight finish, later calls fail with `ErrEndpointServerSideException` (the call goes elsewhere). */
  async close(): Promise<void> {
    this.closed = true;
    for (const c of this.clients) c.close();
  }

  /** Cancels calls in flight (they fail with `ErrCancelled`) and closes the channels. */
  async destroy(): Promise<void> {
    this.destroyed = true;
    for (const call of this.inFlight) call.cancel();
    this.inFlight.clear();
    await this.close();
  }
}

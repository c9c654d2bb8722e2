/**
 * The BDS wire format, loaded once from svc's own `.proto` files (./proto/, shipped in dist/ beside this module) with protobufjs:
 * encoders for the requests, decoders for the responses, and the decoder of the structured error a BDS server attaches to a
 * failed call. Decoded messages are plain objects: 64-bit numbers as decimal strings (no precision lost), bytes as Buffers,
 * proto3 defaults filled in, unset `optional` fields left undefined (./to-json.ts relies on that).
 */
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import type { BdsRpc } from './requests.ts';

/** The gRPC service the calls go to. */
export const SERVICE = 'bds.evm.RPCQueryService';

/** The `.proto` files, by path (the same folder in sources and in dist/). */
export const PROTO_FILES: readonly string[] = ['evm.proto', 'errors.proto', 'status.proto'].map((f) => fileURLToPath(new URL(`./proto/${f}`, import.meta.url)));

const TO_OBJECT: protobuf.IConversionOptions = { longs: String, bytes: Buffer, defaults: true, enums: String };

let root: protobuf.Root | undefined;

/** The parsed `.proto` files (parsed on first use). @throws Error when a file is missing (a broken install) */
export function bdsRoot(): protobuf.Root {
  if (!root) {
    const r = new protobuf.Root();
    r.loadSync(PROTO_FILES as string[], { keepCase: true });
    r.resolveAll();
    root = r;
  }
  return root;
}

/** How one RPC's messages are written and read. */
export interface RpcCodec {
  /** `/bds.evm.RPCQueryService/<rpc>`. */
  path: string;
  /** Encodes a request object. @throws Error when the object does not fit the message (svc's bug, never the upstream's) */
  encode(request: Record<string, unknown>): Buffer;
  /** Decodes a response. @throws Error on bytes that are not the message */
  decode(bytes: Buffer): Record<string, unknown>;
  /** The response message's type (./size.ts reads an answer's bytes with it before decoding them). */
  responseType: protobuf.Type;
}

const codecs = new Map<BdsRpc, RpcCodec>();

/** The codec of an RPC of {@link SERVICE}. */
export function codecOf(rpc: BdsRpc): RpcCodec {
  let c = codecs.get(rpc);
  if (!c) {
    const method = bdsRoot().lookupService(SERVICE).methods[rpc];
    if (!method?.resolvedRequestType || !method.resolvedResponseType) throw new Error(`${SERVICE} has no RPC ${rpc}`);
    const req = method.resolvedRequestType;
    const res = method.resolvedResponseType;
    c = {
      path: `/${SERVICE}/${rpc}`,
      encode: (o) => Buffer.from(req.encode(req.fromObject(o)).finish()),
      decode: (b) => res.toObject(res.decode(b), TO_OBJECT),
      responseType: res,
    };
    codecs.set(rpc, c);
  }
  return c;
}

/** Bytes that are not the message they should be (the decoder's reason as the message). */
export class Undecodable extends Error {
  override readonly name = 'Undecodable';
}

/**
 * The entries of one repeated message field of a response, decoded one at a time in wire order (each as {@link RpcCodec.decode}
 * gives it); every other field is skipped. A caller that stops early decodes no more.
 * @param type the response message's type
 * @param bytes the response message
 * @param field the repeated message field (`logs`)
 * @throws Undecodable on bytes that are not the message
 * @throws Error when the field is not a repeated message field of the type (svc's bug)
 */
export function* entriesOf(type: protobuf.Type, bytes: Uint8Array, field: string): Generator<Record<string, unknown>> {
  const f = type.fields[field];
  const entry = f?.resolvedType;
  if (!f?.repeated || !(entry instanceof protobuf.Type)) throw new Error(`${type.name} has no repeated message field ${field}`);
  const r = protobuf.Reader.create(bytes);
  while (r.pos < r.len) {
    let next: Record<string, unknown> | undefined;
    try {
      const tag = r.uint32();
      if (tag >>> 3 === f.id && (tag & 7) === 2) next = entry.toObject(entry.decode(r, r.uint32()), TO_OBJECT);
      else r.skipType(tag & 7);
    } catch (e) {
      throw new Undecodable((e as Error).message);
    }
    if (next) yield next;
  }
}

/** A BDS server's structured error (`bds.common.ErrorDetails`): its code name and message. */
export interface BdsErrorDetails {
  /** The `ErrorCode` name, e.g. `RANGE_TOO_LARGE`; a number the enum lacks stays a number. */
  code: string | number;
  message: string;
}

const ERROR_DETAILS_TYPE = 'bds.common.ErrorDetails';

/**
 * The BDS error in a failed call's `grpc-status-details-bin` trailer (a google.rpc.Status whose details hold a
 * `bds.common.ErrorDetails`); undefined when there is none or the bytes do not decode.
 * @param statusDetails the trailer's bytes
 */
export function bdsErrorOf(statusDetails: Buffer | undefined): BdsErrorDetails | undefined {
  if (!statusDetails || statusDetails.length === 0) return undefined;
  try {
    const r = bdsRoot();
    const status = r.lookupType('google.rpc.Status').decode(statusDetails) as unknown as { details?: Array<{ type_url?: string; value?: Uint8Array }> };
    for (const d of status.details ?? []) {
      if (!d.type_url?.endsWith(`/${ERROR_DETAILS_TYPE}`) || !d.value) continue;
      const t = r.lookupType(ERROR_DETAILS_TYPE);
      const o = t.toObject(t.decode(d.value), { enums: String, defaults: true }) as { code: string | number; message: string };
      return { code: o.code, message: o.message };
    }
  } catch {
    // Undecodable details: the gRPC status code alone names the error.
  }
  return undefined;
}

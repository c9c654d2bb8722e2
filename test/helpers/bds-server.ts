/**
 * A fake Blockchain Data Standards (BDS) gRPC server for tests (@grpc/grpc-js, the service loaded from the bds plugin's `.proto`
 * files with @grpc/proto-loader): it serves `bds.evm.RPCQueryService` by asking a real node (anvil) over JSON-RPC and converting
 * its answers to the protobuf models, as a BDS indexer would. Tests script faults per RPC (a gRPC status, BDS error details, raw
 * bytes instead of a message), a wrong chain id, and read the metadata and requests each RPC received.
 */
import { fileURLToPath } from 'node:url';
import {
  Metadata,
  Server,
  ServerCredentials,
  status as Status,
  type ServerUnaryCall,
  type sendUnaryData,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { loadSync, type MethodDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs';

const PROTO_DIR = fileURLToPath(new URL('../../plugins/bds/proto/', import.meta.url));

/** What a scripted fault makes an RPC answer instead of the node's data. */
export type BdsFault =
  /** A gRPC status, optionally with BDS error details (`bds.common.ErrorDetails` code name) in the status details. */
  | { code: Status; message?: string; bdsCode?: string }
  /** These bytes as the response message (garbage, or a huge message). */
  | { raw: Buffer }
  /** No answer at all (the call hangs until its deadline or cancellation). */
  | { hang: true };

/** A running fake BDS server. */
export interface BdsServer {
  /** `grpc://127.0.0.1:<port>`. */
  endpoint: string;
  port: number;
  /** Requests received per RPC (`GetBlockByNumber`...), as decoded objects. */
  requests: Map<string, Array<Record<string, unknown>>>;
  /** Metadata of the last call, as a plain object. */
  lastMetadata?: Record<string, unknown>;
  /** Faults by RPC name, applied while set. */
  faults: Map<string, BdsFault>;
  /** The chain id `ChainId` answers (default: the node's). */
  chainIdOverride?: number;
  /** Number of calls received over all RPCs. */
  calls(rpc?: string): number;
  stop(): Promise<void>;
}

/** A JSON-RPC call to the node behind the fake server. */
export type NodeRpc = (method: string, params?: unknown[]) => Promise<any>;

const RPCS = ['ChainId', 'GetBlockByNumber', 'GetBlockByHash', 'GetLogs', 'GetTransactionByHash', 'GetTransactionReceipt', 'GetBlockReceipts'];

// ---- JSON-RPC → protobuf models (what a BDS indexer stores) -------------------------------------------------------------

type J = Record<string, any>;
const buf = (h: string | undefined | null): Buffer | undefined => {
  if (typeof h !== 'string') return undefined;
  const s = h.slice(2);
  return Buffer.from(s.length % 2 ? `0${s}` : s, 'hex');
};
const dec = (h: string | undefined | null): string | undefined => (typeof h === 'string' ? BigInt(h).toString(10) : undefined);
const num = (h: string | undefined | null): number | undefined => (typeof h === 'string' ? Number(BigInt(h)) : undefined);
/** Anvil writes a receipt's blockTimestamp as a JSON number, everything else as a hex quantity. */
const u64 = (v: unknown): string | undefined => (typeof v === 'number' ? String(v) : dec(v as string | undefined));

function logOf(l: J): J {
  return {
    address: buf(l.address),
    topics: (l.topics ?? []).map(buf),
    data: buf(l.data),
    blockNumber: dec(l.blockNumber),
    blockHash: buf(l.blockHash),
    transactionHash: buf(l.transactionHash),
    transactionIndex: num(l.transactionIndex),
    logIndex: num(l.logIndex),
    blockTimestamp: u64(l.blockTimestamp),
  };
}

function txOf(t: J): J {
  return {
    hash: buf(t.hash),
    nonce: dec(t.nonce),
    from: buf(t.from),
    to: buf(t.to),
    value: dec(t.value),
    input: buf(t.input),
    type: num(t.type),
    gasLimit: dec(t.gas),
    gasPrice: dec(t.gasPrice),
    maxFeePerGas: dec(t.maxFeePerGas),
    maxPriorityFeePerGas: dec(t.maxPriorityFeePerGas),
    r: buf(t.r),
    s: buf(t.s),
    v: buf(t.v),
    yParity: num(t.yParity),
    chainId: dec(t.chainId),
    blockNumber: dec(t.blockNumber),
    blockHash: buf(t.blockHash),
    transactionIndex: num(t.transactionIndex),
    blockTimestamp: u64(t.blockTimestamp),
    accessList: (t.accessList ?? []).map((a: J) => ({ address: buf(a.address), storageKeys: (a.storageKeys ?? []).map(buf) })),
    maxFeePerBlobGas: dec(t.maxFeePerBlobGas),
    blobVersionedHashes: (t.blobVersionedHashes ?? []).map(buf),
  };
}

function receiptOf(r: J): J {
  return {
    transactionHash: buf(r.transactionHash),
    blockNumber: dec(r.blockNumber),
    blockHash: buf(r.blockHash),
    transactionIndex: num(r.transactionIndex),
    type: num(r.type),
    from: buf(r.from),
    to: buf(r.to),
    status: num(r.status),
    gasUsed: dec(r.gasUsed),
    cumulativeGasUsed: dec(r.cumulativeGasUsed),
    effectiveGasPrice: dec(r.effectiveGasPrice),
    logsBloom: buf(r.logsBloom),
    logs: (r.logs ?? []).map(logOf),
    contractAddress: buf(r.contractAddress),
    root: buf(r.root),
    blockTimestamp: u64(r.blockTimestamp),
    blobGasUsed: dec(r.blobGasUsed),
    blobGasPrice: dec(r.blobGasPrice),
  };
}

function blockOf(b: J | null, full: boolean): J {
  if (!b) return {};
  const block = {
    number: dec(b.number),
    timestamp: dec(b.timestamp),
    gasLimit: dec(b.gasLimit),
    gasUsed: dec(b.gasUsed),
    size: dec(b.size),
    hash: buf(b.hash),
    parentHash: buf(b.parentHash),
    stateRoot: buf(b.stateRoot),
    transactionsRoot: buf(b.transactionsRoot),
    receiptsRoot: buf(b.receiptsRoot),
    sha3Uncles: buf(b.sha3Uncles),
    miner: buf(b.miner),
    logsBloom: buf(b.logsBloom),
    extraData: buf(b.extraData),
    nonce: dec(b.nonce),
    blobGasUsed: dec(b.blobGasUsed),
    excessBlobGas: dec(b.excessBlobGas),
    mixHash: buf(b.mixHash),
    parentBeaconBlockRoot: buf(b.parentBeaconBlockRoot),
    withdrawalsRoot: buf(b.withdrawalsRoot),
    baseFeePerGas: dec(b.baseFeePerGas),
    difficulty: dec(b.difficulty),
    totalDifficulty: dec(b.totalDifficulty),
    uncles: (b.uncles ?? []).map(buf),
    requestsHash: buf(b.requestsHash),
  };
  const txs: J[] = b.transactions ?? [];
  return {
    block,
    transactions: full ? [] : txs.map((h) => buf(h as unknown as string)),
    fullTransactions: full ? txs.map(txOf) : [],
    withdrawals: (b.withdrawals ?? []).map((w: J) => ({
      index: dec(w.index),
      validatorIndex: dec(w.validatorIndex),
      address: buf(w.address),
      amount: dec(w.amount),
    })),
  };
}

const hex = (b: Buffer | undefined) => (b && b.length ? `0x${b.toString('hex')}` : undefined);
const qhex = (d: string | undefined) => (d === undefined ? undefined : `0x${BigInt(d).toString(16)}`);

/** The status-details trailer carrying a BDS error code (google.rpc.Status with a bds.common.ErrorDetails detail). */
function statusDetails(root: protobuf.Root, code: Status, message: string, bdsCode: string): Buffer {
  const details = root.lookupType('bds.common.ErrorDetails');
  const value = details.encode(details.fromObject({ code: bdsCode, message })).finish();
  const st = root.lookupType('google.rpc.Status');
  return Buffer.from(st.encode(st.fromObject({ code, message, details: [{ type_url: 'type.googleapis.com/bds.common.ErrorDetails', value }] })).finish());
}

/**
 * Starts a fake BDS server on 127.0.0.1 serving from a node.
 * @param node the node's JSON-RPC (e.g. `anvil.rpc`)
 */
export async function startBdsServer(node: NodeRpc): Promise<BdsServer> {
  const files = ['evm.proto', 'errors.proto', 'status.proto'].map((f) => PROTO_DIR + f);
  const def = loadSync(files, { keepCase: true, longs: String, bytes: Buffer, defaults: true, enums: String });
  const root = new protobuf.Root();
  root.loadSync(files, { keepCase: true });
  const service: Record<string, MethodDefinition<object, object>> = {};
  for (const rpc of RPCS) {
    const m = (def['bds.evm.RPCQueryService'] as Record<string, MethodDefinition<object, object>>)[rpc] as MethodDefinition<object, object>;
    // Raw bytes pass through, so a test can answer garbage.
    service[rpc] = { ...m, responseSerialize: (v: object) => (Buffer.isBuffer(v) ? v : m.responseSerialize(v)) };
  }
  const server = new Server({ 'grpc.max_send_message_length': 512 * 1024 * 1024 });
  const state: BdsServer = {
    endpoint: '',
    port: 0,
    requests: new Map(),
    faults: new Map(),
    calls: (rpc?: string) => (rpc ? (state.requests.get(rpc)?.length ?? 0) : [...state.requests.values()].reduce((n, l) => n + l.length, 0)),
    stop: () => new Promise<void>((res) => server.tryShutdown(() => res())).then(() => server.forceShutdown()),
  };
  const handlers: Record<string, (req: J) => Promise<J>> = {
    ChainId: async () => ({ chainId: state.chainIdOverride !== undefined ? String(state.chainIdOverride) : dec(await node('eth_chainId')) }),
    GetBlockByNumber: async (q) => blockOf(await node('eth_getBlockByNumber', [q.blockNumber, q.includeTransactions]), q.includeTransactions),
    GetBlockByHash: async (q) => blockOf(await node('eth_getBlockByHash', [hex(q.blockHash), q.includeTransactions]), q.includeTransactions),
    GetTransactionByHash: async (q) => {
      const t = await node('eth_getTransactionByHash', [hex(q.transactionHash)]);
      return t ? { transaction: txOf(t) } : {};
    },
    GetTransactionReceipt: async (q) => {
      const r = await node('eth_getTransactionReceipt', [hex(q.transactionHash)]);
      return r ? { receipt: receiptOf(r) } : {};
    },
    GetBlockReceipts: async (q) => ({ receipts: ((await node('eth_getBlockReceipts', [q.blockNumber ?? hex(q.blockHash)])) ?? []).map(receiptOf) }),
    GetLogs: async (q) => {
      const filter: J = { address: (q.addresses as Buffer[]).map(hex), topics: (q.topics as J[]).map((t) => (t.values.length ? t.values.map(hex) : null)) };
      if (q.blockHash?.length) filter.blockHash = hex(q.blockHash);
      else Object.assign(filter, { fromBlock: qhex(q.fromBlock), toBlock: qhex(q.toBlock) });
      return { logs: ((await node('eth_getLogs', [filter])) as J[]).map(logOf) };
    },
  };
  const impl: UntypedServiceImplementation = {};
  for (const rpc of RPCS) {
    impl[rpc] = (call: ServerUnaryCall<J, J>, cb: sendUnaryData<J>) => {
      state.lastMetadata = call.metadata.getMap();
      const list = state.requests.get(rpc) ?? [];
      list.push(call.request);
      state.requests.set(rpc, list);
      const fault = state.faults.get(rpc);
      if (fault && 'hang' in fault) return;
      if (fault && 'raw' in fault) return cb(null, fault.raw as unknown as J);
      if (fault) {
        const md = new Metadata();
        if (fault.bdsCode) md.set('grpc-status-details-bin', statusDetails(root, fault.code, fault.message ?? '', fault.bdsCode));
        return cb({ code: fault.code, details: fault.message ?? Status[fault.code], metadata: md });
      }
      // A chain-aware server refuses a request asserting another chain.
      const asserted = call.request.chainId;
      const served = state.chainIdOverride;
      if (asserted !== undefined && served !== undefined && String(served) !== String(asserted)) {
        return cb({ code: Status.INVALID_ARGUMENT, details: `this server serves chain ${served}, not ${asserted}` });
      }
      (handlers[rpc] as (q: J) => Promise<J>)(call.request).then(
        (res) => cb(null, res),
        (e: Error) => cb({ code: Status.INTERNAL, details: e.message }),
      );
    };
  }
  server.addService(service, impl);
  state.port = await new Promise<number>((res, rej) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, port) => (e ? rej(e) : res(port))),
  );
  state.endpoint = `grpc://127.0.0.1:${state.port}`;
  return state;
}

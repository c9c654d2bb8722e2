/**
 * The bds plugin's pure parts: JSON-RPC params → BDS requests (which RPC, which fields, what BDS cannot carry), BDS models → the
 * JSON-RPC shapes an HTTP node writes (through a real protobuf encode/decode of svc's own .proto files), gRPC status and BDS
 * error details → svc's named errors, and the endpoint's address and TLS choice.
 */
import { expect } from 'chai';
import { status as Status } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { errorOfStatus } from '../../../plugins/bds/errors.ts';
import { bdsErrorOf, bdsRoot, codecOf, PROTO_FILES } from '../../../plugins/bds/proto.ts';
import { InvalidParams, planCall, Unservable } from '../../../plugins/bds/requests.ts';
import { blockToJson, bytesQty, logToJson, MalformedModel, qty, receiptToJson, transactionToJson } from '../../../plugins/bds/to-json.ts';
import { targetOf } from '../../../plugins/bds/transport.ts';
import { createProxy } from '../../../core/host/create.ts';
import { createLogger } from '../../../lib/logger.ts';
import { defaultPreset } from '../../../presets/default.ts';

const H = (b: string) => `0x${b.repeat(32)}`;
const A = (b: string) => `0x${b.repeat(20)}`;
const buf = (h: string) => Buffer.from(h.slice(2), 'hex');

/** A response message through the wire: encoded from an object, decoded as the transport decodes it. */
function wire(rpc: Parameters<typeof codecOf>[0], o: Record<string, unknown>): Record<string, unknown> {
  const t = bdsRoot().lookupService('bds.evm.RPCQueryService').methods[rpc]!.resolvedResponseType!;
  return codecOf(rpc).decode(Buffer.from(t.encode(t.fromObject(o)).finish()));
}

describe('bds plugin: JSON-RPC calls → BDS requests', () => {
  it('maps the seven methods to their RPCs, asserting the configured chain id', () => {
    expect(planCall('eth_chainId', [], 1).rpc).to.equal('ChainId');
    const byNum = planCall('eth_getBlockByNumber', ['0x0a', true], 1);
    expect(byNum.rpc).to.equal('GetBlockByNumber');
    expect(byNum.request).to.deep.equal({ blockNumber: '0xa', includeTransactions: true, chainId: '1' });
    expect(planCall('eth_getBlockByNumber', ['finalized', false], undefined).request).to.deep.equal({ blockNumber: 'finalized', includeTransactions: false });
    expect(planCall('eth_getBlockByHash', [H('11'), false], 1).request).to.deep.equal({ blockHash: buf(H('11')), includeTransactions: false, chainId: '1' });
    expect(planCall('eth_getTransactionByHash', [H('22')], 1).rpc).to.equal('GetTransactionByHash');
    expect(planCall('eth_getTransactionReceipt', [H('22')], 1).rpc).to.equal('GetTransactionReceipt');
    expect(planCall('eth_getBlockReceipts', ['0x5'], 1).request).to.deep.equal({ blockNumber: '0x5', chainId: '1' });
    expect(planCall('eth_getBlockReceipts', [H('33')], 1).request).to.deep.equal({ blockHash: buf(H('33')), chainId: '1' });
  });

  it('EIP-1898 block objects: a blockHash goes to GetBlockByHash, a blockNumber to GetBlockByNumber', () => {
    expect(planCall('eth_getBlockByNumber', [{ blockHash: H('44') }, false], 1).rpc).to.equal('GetBlockByHash');
    expect(planCall('eth_getBlockReceipts', [{ blockNumber: '0x10' }], 1).request).to.deep.equal({ blockNumber: '0x10', chainId: '1' });
  });

  it('eth_getLogs: numeric bounds as uint64, addresses, topics with null positions kept, or a block hash', () => {
    const p = planCall('eth_getLogs', [{ fromBlock: '0x10', toBlock: '0x20', address: [A('aa'), A('bb')], topics: [H('01'), null, [H('02'), H('03')]] }], 1);
    expect(p.rpc).to.equal('GetLogs');
    expect(p.request).to.deep.equal({
      fromBlock: '16',
      toBlock: '32',
      addresses: [buf(A('aa')), buf(A('bb'))],
      topics: [{ values: [buf(H('01'))] }, { values: [] }, { values: [buf(H('02')), buf(H('03'))] }],
      chainId: '1',
    });
    expect(planCall('eth_getLogs', [{ blockHash: H('05'), address: A('aa') }], undefined).request).to.deep.equal({
      addresses: [buf(A('aa'))],
      topics: [],
      blockHash: buf(H('05')),
    });
  });

  it('what BDS cannot carry is Unservable (the call goes elsewhere): other methods, tags in eth_getLogs, malformed params', () => {
    const refused: Array<[string, unknown]> = [
      ['eth_blockNumber', []],
      ['eth_getBalance', [A('aa'), 'latest']],
      ['eth_getLogs', [{ fromBlock: 'latest', toBlock: 'latest' }]],
      ['eth_getLogs', [{}]],
      ['eth_getLogs', ['nope']],
      ['eth_getBlockByNumber', ['0x1']],
      ['eth_getBlockByNumber', ['pending-ish', false]],
      ['eth_getBlockByHash', ['0x12', false]],
      ['eth_getTransactionByHash', [42]],
      ['eth_getBlockByNumber', { not: 'a list' }],
      ['eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x2', address: '0x12' }]],
      ['eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x2', topics: ['0x12'] }]],
    ];
    for (const [m, params] of refused) {
      expect(() => planCall(m, params, 1), `${m} ${JSON.stringify(params)}`)
        .to.throw(Unservable)
        .with.property('kind', m === 'eth_blockNumber' || m === 'eth_getBalance' ? 'method' : 'params');
    }
  });

  it('eth_getLogs with both a block hash and a bound is invalid params (a node refuses it too); null bounds are absent', () => {
    expect(() => planCall('eth_getLogs', [{ blockHash: H('05'), fromBlock: '0x1' }], 1)).to.throw(InvalidParams);
    expect(() => planCall('eth_getLogs', [{ blockHash: H('05'), toBlock: 'latest' }], 1)).to.throw(InvalidParams);
    expect(planCall('eth_getLogs', [{ blockHash: H('05'), fromBlock: null, toBlock: null }], 1).request).to.have.property('blockHash');
  });
});

describe('bds plugin: BDS models → JSON-RPC shapes', () => {
  it('quantities drop leading zeros; a byte string read as a quantity too; a bad number is malformed', () => {
    expect(qty('0')).to.equal('0x0');
    expect(qty('18446744073709551615')).to.equal('0xffffffffffffffff');
    expect(qty(17)).to.equal('0x11');
    expect(bytesQty(Buffer.from('000102', 'hex'))).to.equal('0x102');
    expect(bytesQty(Buffer.alloc(0))).to.equal('0x0');
    expect(() => qty('-1')).to.throw(MalformedModel);
    expect(() => qty('1'.repeat(21))).to.throw(MalformedModel);
  });

  it('a block: fields a node writes, optional ones only when present, withdrawals after Shanghai, hashes or full transactions', () => {
    const header = {
      number: '2',
      timestamp: '1700000000',
      gasLimit: '30000000',
      gasUsed: '21000',
      size: '721',
      hash: buf(H('aa')),
      parentHash: buf(H('bb')),
      stateRoot: buf(H('cc')),
      transactionsRoot: buf(H('dd')),
      receiptsRoot: buf(H('ee')),
      sha3Uncles: buf(H('ff')),
      miner: buf(A('00')),
      logsBloom: Buffer.alloc(256),
      extraData: Buffer.alloc(0),
      nonce: '0',
      baseFeePerGas: '875000000',
      difficulty: '0',
      mixHash: buf(H('12')),
      withdrawalsRoot: buf(H('13')),
    };
    const tx = { hash: buf(H('01')), nonce: '1', from: buf(A('0f')), to: buf(A('70')), value: '16', input: Buffer.alloc(0), type: 2, gasLimit: '21000' };
    const hashes = blockToJson(wire('GetBlockByNumber', { block: header, transactions: [buf(H('01'))] }), false)!;
    expect(hashes).to.include({
      number: '0x2',
      gasLimit: '0x1c9c380',
      nonce: '0x0000000000000000',
      baseFeePerGas: '0x342770c0',
      difficulty: '0x0',
      extraData: '0x',
      size: '0x2d1',
    });
    expect(hashes.transactions).to.deep.equal([H('01')]);
    expect(hashes.uncles).to.deep.equal([]);
    expect(hashes.withdrawals).to.deep.equal([]);
    for (const absent of ['blobGasUsed', 'excessBlobGas', 'parentBeaconBlockRoot', 'requestsHash', 'totalDifficulty'])
      expect(hashes).to.not.have.property(absent);
    const full = blockToJson(wire('GetBlockByNumber', { block: header, fullTransactions: [tx] }), true)!;
    expect((full.transactions as Array<Record<string, unknown>>)[0]).to.include({ hash: H('01'), to: A('70'), value: '0x10', gas: '0x5208', type: '0x2' });
    expect(blockToJson(wire('GetBlockByNumber', {}), false)).to.equal(null);
    const preShanghai = blockToJson(wire('GetBlockByNumber', { block: { ...header, withdrawalsRoot: undefined } }), false)!;
    expect(preShanghai).to.not.have.property('withdrawals');
  });

  it('transactions: legacy without accessList/yParity, typed with both, a creation with to null, r/s/v as quantities', () => {
    const legacy = transactionToJson(
      wire('GetTransactionByHash', {
        transaction: {
          hash: buf(H('01')),
          type: 0,
          nonce: '0',
          from: buf(A('0f')),
          value: '0',
          gasLimit: '21000',
          gasPrice: '1000000000',
          r: buf(`0x00${'11'.repeat(31)}`),
          s: buf(H('22')),
          v: Buffer.from('f4f6', 'hex'),
          chainId: '31337',
        },
      }).transaction as Record<string, unknown>,
    );
    expect(legacy).to.include({ type: '0x0', to: null, gasPrice: '0x3b9aca00', v: '0xf4f6', chainId: '0x7a69', r: `0x${'11'.repeat(31)}` });
    expect(legacy).to.not.have.property('accessList');
    expect(legacy).to.not.have.property('yParity');
    const typed = transactionToJson(
      wire('GetTransactionByHash', {
        transaction: {
          hash: buf(H('02')),
          type: 2,
          nonce: '5',
          from: buf(A('0f')),
          to: buf(A('70')),
          value: '1',
          gasLimit: '21000',
          yParity: 1,
          v: Buffer.from('01', 'hex'),
          accessList: [{ address: buf(A('aa')), storageKeys: [buf(H('bb'))] }],
          blockNumber: '7',
          transactionIndex: 0,
        },
      }).transaction as Record<string, unknown>,
    );
    expect(typed).to.deep.include({
      yParity: '0x1',
      v: '0x1',
      blockNumber: '0x7',
      transactionIndex: '0x0',
      accessList: [{ address: A('aa'), storageKeys: [H('bb')] }],
    });
    expect(typed).to.not.have.property('blockHash');
  });

  it('receipts and logs: status, contractAddress null or set, logs with removed false', () => {
    const log = {
      address: buf(A('aa')),
      topics: [buf(H('01'))],
      data: buf(H('02')),
      blockNumber: '3',
      blockHash: buf(H('03')),
      transactionHash: buf(H('04')),
      transactionIndex: 1,
      logIndex: 2,
      blockTimestamp: '10',
    };
    const r = receiptToJson(
      wire('GetTransactionReceipt', {
        receipt: {
          transactionHash: buf(H('04')),
          blockNumber: '3',
          blockHash: buf(H('03')),
          transactionIndex: 1,
          type: 2,
          from: buf(A('0f')),
          status: 1,
          gasUsed: '21000',
          cumulativeGasUsed: '42000',
          effectiveGasPrice: '7',
          logsBloom: Buffer.alloc(256),
          logs: [log],
          contractAddress: buf(A('cc')),
        },
      }).receipt as Record<string, unknown>,
    );
    expect(r).to.include({ status: '0x1', to: null, contractAddress: A('cc'), cumulativeGasUsed: '0xa410', effectiveGasPrice: '0x7', type: '0x2' });
    expect(r.logs).to.deep.equal([
      {
        address: A('aa'),
        topics: [H('01')],
        data: H('02'),
        blockHash: H('03'),
        blockNumber: '0x3',
        blockTimestamp: '0xa',
        transactionHash: H('04'),
        transactionIndex: '0x1',
        logIndex: '0x2',
        removed: false,
      },
    ]);
    expect(logToJson({})).to.include({ address: '0x', data: '0x', logIndex: '0x0', removed: false });
  });

  it('a decimal amount that is not one (or longer than 256 bits) is malformed, never a crash', () => {
    expect(() => transactionToJson({ value: '12abc' })).to.throw(MalformedModel);
    expect(() => transactionToJson({ value: '9'.repeat(100) })).to.throw(MalformedModel);
    expect(() => receiptToJson({ effectiveGasPrice: 'NaN' })).to.throw(MalformedModel);
  });
});

describe('bds plugin: gRPC failures → svc errors (eRPC mapping)', () => {
  const err = (code: Status, bds?: { code: string; message: string }) =>
    errorOfStatus({ code, details: 'upstream said Bearer sekrit-token-1234' }, bds, 'u1', 'eth_getLogs', (t) => t.replace('sekrit-token-1234', '[REDACTED]'));

  it('gRPC codes when there is no BDS detail', () => {
    const names: Array<[Status, string]> = [
      // The server's or a proxy's cancellation (a stream reset), never svc's own: an upstream fault the call fails over from.
      [Status.CANCELLED, 'ErrEndpointServerSideException'],
      [Status.UNIMPLEMENTED, 'ErrEndpointUnsupported'],
      [Status.INVALID_ARGUMENT, 'ErrEndpointClientSideException'],
      [Status.RESOURCE_EXHAUSTED, 'ErrEndpointCapacityExceeded'],
      [Status.DEADLINE_EXCEEDED, 'ErrEndpointRequestTimeout'],
      [Status.UNAUTHENTICATED, 'ErrEndpointUnauthorized'],
      [Status.PERMISSION_DENIED, 'ErrEndpointUnauthorized'],
      [Status.NOT_FOUND, 'ErrEndpointMissingData'],
      [Status.OUT_OF_RANGE, 'ErrEndpointMissingData'],
      [Status.UNAVAILABLE, 'ErrEndpointServerSideException'],
      [Status.INTERNAL, 'ErrEndpointServerSideException'],
      [Status.UNKNOWN, 'ErrEndpointServerSideException'],
      [Status.DATA_LOSS, 'ErrEndpointServerSideException'],
    ];
    for (const [code, name] of names) expect(err(code).name, Status[code]).to.equal(name);
  });

  it('a BDS error code wins over the gRPC code; the message is redacted', () => {
    const e = err(Status.INTERNAL, { code: 'RANGE_TOO_LARGE', message: 'too many blocks' });
    expect(e.name).to.equal('ErrEndpointRequestTooLarge');
    expect(e.details).to.include({ grpcCode: 'INTERNAL', bdsErrorCode: 'RANGE_TOO_LARGE', upstream: 'u1' });
    // A block tag is this call's params, not the method: auto-ignore must not switch the method off.
    expect(err(Status.UNKNOWN, { code: 'UNSUPPORTED_BLOCK_TAG', message: '' }).name).to.equal('ErrEndpointParamsUnsupported');
    expect(err(Status.UNKNOWN, { code: 'UNSUPPORTED_METHOD', message: '' }).name).to.equal('ErrEndpointUnsupported');
    expect(err(Status.UNKNOWN, { code: 'RANGE_OUTSIDE_AVAILABLE', message: '' }).name).to.equal('ErrEndpointMissingData');
    expect(err(Status.UNKNOWN, { code: 'RATE_LIMITED', message: '' }).name).to.equal('ErrEndpointCapacityExceeded');
    expect(err(Status.UNKNOWN, { code: 'TIMEOUT_ERROR', message: '' }).name).to.equal('ErrEndpointRequestTimeout');
    expect(err(Status.UNKNOWN, { code: 'INVALID_PARAMETER', message: '' }).name).to.equal('ErrEndpointClientSideException');
    expect(err(Status.UNAVAILABLE).message).to.include('[REDACTED]').and.not.include('sekrit');
  });

  it('the BDS error rides in grpc-status-details-bin; undecodable details are ignored', () => {
    const root = new protobuf.Root();
    root.loadSync(PROTO_FILES as string[], { keepCase: true });
    const d = root.lookupType('bds.common.ErrorDetails');
    const st = root.lookupType('google.rpc.Status');
    const bytes = Buffer.from(
      st
        .encode(
          st.fromObject({
            code: 9,
            message: 'm',
            details: [
              { type_url: 'type.googleapis.com/bds.common.ErrorDetails', value: d.encode(d.fromObject({ code: 'RANGE_TOO_LARGE', message: 'wide' })).finish() },
            ],
          }),
        )
        .finish(),
    );
    expect(bdsErrorOf(bytes)).to.deep.equal({ code: 'RANGE_TOO_LARGE', message: 'wide' });
    expect(bdsErrorOf(Buffer.from('ffffffff', 'hex'))).to.equal(undefined);
    expect(bdsErrorOf(undefined)).to.equal(undefined);
  });
});

describe('bds plugin: endpoint address and TLS (eRPC: grpcs, a tls scheme or port 443; port 50051 by default)', () => {
  it('picks address and TLS', () => {
    expect(targetOf('grpc://node.internal')).to.deep.equal({ address: 'node.internal:50051', tls: false });
    expect(targetOf('grpc+bds://node.internal:9000')).to.deep.equal({ address: 'node.internal:9000', tls: false });
    expect(targetOf('grpc://node.internal:443')).to.deep.equal({ address: 'node.internal:443', tls: true });
    expect(targetOf('grpcs://node.internal:8443')).to.deep.equal({ address: 'node.internal:8443', tls: true });
    expect(targetOf('grpc://node.internal:8443').tls).to.equal(false);
  });
});

describe('bds plugin: config', () => {
  it('a grpc block on an http(s) upstream is ignored with a warning', async () => {
    const proxy = createProxy({
      config: { projects: [{ id: 'main', upstreams: [{ endpoint: 'http://127.0.0.1:1', evm: { chainId: 1 }, grpc: { headers: { a: 'b' } } }] }] },
      plugins: defaultPreset(),
      logger: createLogger('silent'),
    });
    try {
      expect(proxy.config.warnings).to.include('projects[0].upstreams[0].grpc: applies to grpc:// endpoints only; this upstream is http:// (ignored)');
    } finally {
      await proxy.close();
    }
  });

  /** The config error of a BDS upstream with these `grpc` settings, or undefined when the config loads. */
  const configError = async (grpc: Record<string, unknown>): Promise<string | undefined> => {
    try {
      const proxy = createProxy({
        config: { projects: [{ id: 'main', upstreams: [{ endpoint: 'grpc://127.0.0.1:1', evm: { chainId: 1 }, grpc }] }] },
        plugins: defaultPreset(),
        logger: createLogger('silent'),
      });
      await proxy.close();
      return undefined;
    } catch (e) {
      return (e as Error).message;
    }
  };

  it('grpc.headers that grpc-js or HTTP/2 would refuse later are refused at load, naming the key and never the value', async () => {
    const refused: Array<[Record<string, string>, string]> = [
      [{ authorization: 'Bearer s3cret\u00e9' }, 'grpc.headers.authorization: must match'],
      [{ 'x-a': 'tab\ts3cret' }, 'grpc.headers.x-a: must match'],
      [{ Connection: 's3cret' }, 'grpc.headers: key "Connection" is not allowed'],
      [{ 'keep-alive': 's3cret' }, 'key "keep-alive"'],
      [{ 'proxy-connection': 's3cret' }, 'key "proxy-connection"'],
      [{ 'transfer-encoding': 's3cret' }, 'key "transfer-encoding"'],
      [{ upgrade: 's3cret' }, 'key "upgrade"'],
      [{ HOST: 's3cret' }, 'key "HOST"'],
      [{ ':authority': 's3cret' }, 'key ":authority"'],
      [{ te: 's3cret' }, 'grpc.headers.te: must be "trailers"'],
      [{ 'grpc-timeout': 's3cret' }, 'key "grpc-timeout"'],
    ];
    for (const [headers, want] of refused) {
      const msg = await configError({ headers });
      expect(msg, JSON.stringify(headers)).to.include(want).and.not.include('s3cret');
    }
    expect(await configError({ headers: { te: 'trailers', 'x-connection-id': 'abc', Authorization: 'Bearer ok' } })).to.equal(undefined);
  });

  it('grpc.maxMessageSize is at most 100MiB (eRPC’s cap)', async () => {
    expect(await configError({ maxMessageSize: '101MiB' })).to.include('grpc.maxMessageSize: at most 104857600 bytes');
    expect(await configError({ maxMessageSize: '100MiB' })).to.equal(undefined);
  });
});

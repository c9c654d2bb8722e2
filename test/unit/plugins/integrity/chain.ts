/**
 * Real chain data for the integrity tests: an anvil node made to mine one block holding several
 * transaction types (legacy EIP-155, EIP-2930, EIP-1559, a contract creation whose constructor
 * emits LOG2, and EIP-7702 on forks that have it), then a second block with another log, and the
 * JSON-RPC answers the integrity checks read (blocks, receipts, logs, transactions).
 */
import { parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../../../helpers/anvil.ts';
import { CheckFailure } from '../../../../plugins/integrity/index.ts';

/** anvil dev accounts #0 and #1 (funded). */
export const PK0: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
export const PK1: Hex = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
/** A plain recipient (dev account #2). */
export const TO: Hex = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
/** The two topics the log contract's constructor emits (topic 0, topic 1). */
export const TOPIC0: Hex = `0x${'11'.repeat(32)}`;
export const TOPIC1: Hex = `0x${'22'.repeat(32)}`;
/** The topic 0 the second block's contract emits. */
export const TOPIC0_B: Hex = `0x${'33'.repeat(32)}`;

/**
 * Creation code whose constructor stores 42 at memory 0 and emits `LOG2(0, 32, t0, t1)`, then
 * returns no runtime: `PUSH1 2a PUSH1 0 MSTORE PUSH32 t1 PUSH32 t0 PUSH1 20 PUSH1 0 LOG2 STOP`.
 */
export function logInit(t0: Hex, t1: Hex): Hex {
  return `0x602a6000527f${t1.slice(2)}7f${t0.slice(2)}60206000a200`;
}

/** Everything one test needs from a mined chain. */
export interface ChainData {
  anvil: AnvilHandle;
  /** Block 1 (several transaction types) with full transactions, and with hashes only. */
  block: Record<string, any>;
  blockHashes: Record<string, any>;
  /** Block 2 (one log-emitting creation), full transactions. */
  block2: Record<string, any>;
  /** Receipts of block 1, in order, and `eth_getBlockReceipts` of it. */
  receipts: Array<Record<string, any>>;
  blockReceipts: Array<Record<string, any>>;
  /** `eth_getLogs` over blocks 1..2, and its filter. */
  logs: Array<Record<string, any>>;
  logsFilter: Record<string, unknown>;
  /** Transaction hashes of block 1, by label. */
  tx: Record<'legacy' | 'eip2930' | 'eip1559' | 'create' | 'eip7702', Hex | undefined>;
}

/**
 * Starts anvil at a hardfork and mines the two blocks.
 * @param hardfork anvil's `--hardfork` (default: anvil's latest)
 */
export async function mineChain(hardfork?: string): Promise<ChainData> {
  const anvil = await startAnvil({ args: hardfork ? ['--hardfork', hardfork] : [] });
  try {
    const chainId = anvil.chainId;
    const a0 = privateKeyToAccount(PK0);
    const a1 = privateKeyToAccount(PK1);
    const london = hardfork === undefined || !['berlin', 'istanbul'].includes(hardfork);
    const prague = hardfork === undefined || hardfork === 'prague';
    await anvil.rpc('evm_setAutomine', [false]);
    const fees = london ? { maxFeePerGas: parseGwei('20'), maxPriorityFeePerGas: parseGwei('1') } : undefined;
    const send = async (raw: Hex): Promise<Hex> => (await anvil.rpc('eth_sendRawTransaction', [raw])) as Hex;
    const tx: ChainData['tx'] = { legacy: undefined, eip2930: undefined, eip1559: undefined, create: undefined, eip7702: undefined };
    tx.legacy = await send(await a0.signTransaction({ type: 'legacy', chainId, nonce: 0, to: TO, value: 1n, gas: 21000n, gasPrice: parseGwei('20') }));
    tx.eip2930 = await send(
      await a0.signTransaction({
        type: 'eip2930',
        chainId,
        nonce: 1,
        to: TO,
        value: 2n,
        gas: 30000n,
        gasPrice: parseGwei('20'),
        accessList: [{ address: TO, storageKeys: [`0x${'00'.repeat(31)}01`] }],
      }),
    );
    if (fees) tx.eip1559 = await send(await a0.signTransaction({ type: 'eip1559', chainId, nonce: 2, to: TO, value: 3n, gas: 21000n, ...fees }));
    const create = { chainId, nonce: fees ? 3 : 2, data: logInit(TOPIC0, TOPIC1), gas: 200000n };
    tx.create = await send(
      await (fees ? a0.signTransaction({ type: 'eip1559', ...create, ...fees }) : a0.signTransaction({ type: 'legacy', ...create, gasPrice: parseGwei('20') })),
    );
    if (prague && fees) {
      // a1 delegates to a plain address (no code needed to include the authorization).
      const authorization = await a1.signAuthorization({ chainId, nonce: 1, contractAddress: TO });
      tx.eip7702 = await send(
        await a1.signTransaction({ type: 'eip7702', chainId, nonce: 0, to: a1.address, value: 0n, gas: 100000n, authorizationList: [authorization], ...fees }),
      );
    }
    await anvil.rpc('evm_mine', []);
    await send(
      await a0.signTransaction({ type: 'legacy', chainId, nonce: fees ? 4 : 3, data: logInit(TOPIC0_B, TOPIC1), gas: 200000n, gasPrice: parseGwei('20') }),
    );
    await anvil.rpc('evm_mine', []);
    const block = await anvil.rpc('eth_getBlockByNumber', ['0x1', true]);
    const labels = Object.values(tx).filter((h): h is Hex => h !== undefined);
    if (block.transactions.length !== labels.length) throw new Error(`block 1 holds ${block.transactions.length} transactions, ${labels.length} were sent`);
    const logsFilter = { fromBlock: '0x1', toBlock: '0x2' };
    return {
      anvil,
      block,
      blockHashes: await anvil.rpc('eth_getBlockByNumber', ['0x1', false]),
      block2: await anvil.rpc('eth_getBlockByNumber', ['0x2', true]),
      receipts: await Promise.all(block.transactions.map((t: { hash: Hex }) => anvil.rpc('eth_getTransactionReceipt', [t.hash]))),
      blockReceipts: await anvil.rpc('eth_getBlockReceipts', ['0x1']),
      logs: await anvil.rpc('eth_getLogs', [logsFilter]),
      logsFilter,
      tx,
    };
  } catch (e) {
    await anvil.stop();
    throw e;
  }
}

/** A deep copy, to tamper with one field. */
export function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** Flips the last hex digit of a hex string (a same-length, different value). */
export function flip(h: string): string {
  const last = h[h.length - 1] as string;
  return h.slice(0, -1) + (last === '0' ? '1' : '0');
}

/** Asserts that a check fails with the named check; returns the failure. */
export async function fails(p: Promise<unknown>, check: string): Promise<CheckFailure> {
  try {
    await p;
  } catch (e) {
    expect(e, String(e)).to.be.instanceOf(CheckFailure);
    expect((e as CheckFailure).check, (e as Error).message).to.equal(check);
    return e as CheckFailure;
  }
  expect.fail(`expected check ${check} to fail`);
}

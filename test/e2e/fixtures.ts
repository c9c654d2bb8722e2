/**
 * Shared constants of the end-to-end suites: anvil's funded dev accounts and two hand-assembled
 * contracts (verified against anvil: creation code, runtime code, call result, revert data).
 */
import type { AnvilHandle } from '../helpers/anvil.ts';
import { waitFor } from '../helpers/svc.ts';

/** anvil dev account #0 (funded with 10 000 ETH). */
export const PK0 = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
export const ADDR0 = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
/** anvil dev accounts #1 and #2: funded, never spent from by these suites. */
export const ADDR1 = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
export const ADDR2 = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
/** 10 000 ETH in wei, the dev accounts' starting balance. */
export const DEV_BALANCE = 10_000n * 10n ** 18n;

/** The 32-byte word the constant contract returns for any call (42). */
export const CONST_WORD = `0x${'00'.repeat(31)}2a`;

/**
 * Runtime: `PUSH32 <word> PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN` (41 bytes): returns
 * {@link CONST_WORD} for any calldata.
 */
export const CONST_RUNTIME = `0x7f${CONST_WORD.slice(2)}60005260206000f3`;

/**
 * Runtime (37 bytes): writes `Error("nope")` ABI data to memory and `REVERT(0, 100)`:
 * `mstore(0, 0x08c379a0 << 224) mstore(4, 0x20) mstore(36, 4) mstore(68, "nope" << 224)`.
 */
export const REVERT_RUNTIME = '0x6308c379a060e01b60005260206004526004602452636e6f706560e01b60445260646000fd';

/** `Error("nope")` revert data, as anvil returns it in `error.data`. */
export const NOPE_REVERT_DATA =
  '0x08c379a0' +
  '0000000000000000000000000000000000000000000000000000000000000020' +
  '0000000000000000000000000000000000000000000000000000000000000004' +
  '6e6f706500000000000000000000000000000000000000000000000000000000';

/**
 * Creation code that copies a runtime to memory and returns it:
 * `PUSH1 len DUP1 PUSH1 0x0b PUSH1 0 CODECOPY PUSH1 0 RETURN` followed by the runtime.
 * @param runtime 0x-prefixed runtime bytecode shorter than 256 bytes
 */
export function creationCode(runtime: string): string {
  const len = (runtime.length - 2) / 2;
  if (len > 255) throw new Error('runtime too long for a PUSH1 length');
  return `0x60${len.toString(16).padStart(2, '0')}80600b6000396000f3${runtime.slice(2)}`;
}

/** Creation code of the constant contract. */
export const CONST_INIT = creationCode(CONST_RUNTIME);
/** Creation code of the reverting contract. */
export const REVERT_INIT = creationCode(REVERT_RUNTIME);

/** One-function ABI used to read the contracts with typed clients. */
export const VALUE_ABI = [{ type: 'function', name: 'value', stateMutability: 'view', inputs: [], outputs: [{ name: '', type: 'uint256' }] }] as const;

/**
 * Deploys a contract straight on anvil (unlocked dev account #0), bypassing svc.
 * @returns the contract address
 */
export async function deployDirect(anvil: AnvilHandle, init: string): Promise<string> {
  const hash = (await anvil.rpc('eth_sendTransaction', [{ from: ADDR0, data: init, gas: '0x100000' }])) as string;
  // anvil mines at once, but the receipt can lag the hash by a moment on a busy machine.
  let receipt: { status: string; contractAddress: string } | null = null;
  await waitFor(async () => (receipt = (await anvil.rpc('eth_getTransactionReceipt', [hash])) as typeof receipt) !== null);
  const r = receipt as { status: string; contractAddress: string } | null;
  if (!r || r.status !== '0x1') throw new Error(`deployment failed: ${JSON.stringify(r)}`);
  return r.contractAddress;
}

/** A JSON-RPC request body. */
export function rpcBody(method: string, params?: unknown[], id: number | string | null = 1): Record<string, unknown> {
  return params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params };
}

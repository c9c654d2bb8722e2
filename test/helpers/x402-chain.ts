/**
 * A payment chain for pay-per-request tests: the EIP-3009 test token and Multicall3 (test/fixtures/contracts) compiled with solc from npm,
 * the token deployed on an anvil, Multicall3's code placed at its canonical address (x402's verifier reads through it), and payers
 * funded. Compiled output is cached in the OS temp directory by source hash, so only the first test file pays the compile.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicClient, createWalletClient, defineChain, http, type Abi, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { AnvilHandle } from './anvil.ts';

const CONTRACTS = join(import.meta.dirname, '..', 'fixtures', 'contracts');
/** Where every public chain has Multicall3. */
export const MULTICALL3_ADDRESS = '0xcA11bde05977b3631167028862bE2a173976CA11';
/** anvil's first two funded accounts: the deployer, and the settler svc pays gas with. */
export const DEPLOYER_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
export const SETTLER_KEY: Hex = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
/** The token's EIP-712 domain. */
export const TOKEN_NAME = 'Test USD';
export const TOKEN_VERSION = '2';

interface Compiled {
  abi: Abi;
  bytecode: Hex;
}

/** Compiles the fixture contracts (cached by source hash). */
export function compileContracts(): { token: Compiled; multicall: Compiled } {
  const sources = Object.fromEntries(['Eip3009Token.sol', 'Multicall3.sol'].map((f) => [f, { content: readFileSync(join(CONTRACTS, f), 'utf8') }]));
  const hash = createHash('sha256').update(JSON.stringify(sources)).digest('hex').slice(0, 16);
  const cache = join(tmpdir(), `svc-test-contracts-${hash}.json`);
  if (existsSync(cache)) return JSON.parse(readFileSync(cache, 'utf8'));
  const solc = createRequire(import.meta.url)('solc') as { compile(input: string): string };
  const out = JSON.parse(
    solc.compile(
      JSON.stringify({
        language: 'Solidity',
        sources,
        settings: { optimizer: { enabled: true, runs: 200 }, outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } },
      }),
    ),
  ) as {
    errors?: Array<{ severity: string; formattedMessage: string }>;
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (out.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) throw new Error(`solc: ${errors.map((e) => e.formattedMessage).join('\n')}`);
  const pick = (file: string, name: string): Compiled => {
    const c = out.contracts[file]![name]!;
    return { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
  };
  const compiled = { token: pick('Eip3009Token.sol', 'Eip3009Token'), multicall: pick('Multicall3.sol', 'Multicall3') };
  writeFileSync(cache, JSON.stringify(compiled));
  return compiled;
}

/** A deployed payment chain. */
export interface PaymentChain {
  chainId: number;
  /** CAIP-2, e.g. `eip155:84532`. */
  network: string;
  token: Hex;
  tokenAbi: Abi;
  /** Who is paid. */
  payTo: Hex;
  /** Payers holding `funds` atomic units each, no ETH (payments are gasless for them). */
  payers: PrivateKeyAccount[];
  /** A payer with no tokens. */
  broke: PrivateKeyAccount;
  /** Token balance of an address, atomic units. */
  balanceOf(address: Hex): Promise<bigint>;
  /** Whether an authorization nonce of `from` was used on chain. */
  used(from: Hex, nonce: Hex): Promise<boolean>;
}

/**
 * Deploys the token and Multicall3 on an anvil and funds `payers` payers.
 * @param funds atomic units minted to each payer
 */
export async function deployPaymentChain(anvil: AnvilHandle, payers = 3, funds = 1_000_000_000n): Promise<PaymentChain> {
  const { token, multicall } = compileContracts();
  const chain = defineChain({
    id: anvil.chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [anvil.url] } },
  });
  const transport = http(anvil.url);
  const deployer = createWalletClient({ account: privateKeyToAccount(DEPLOYER_KEY), chain, transport });
  const reader = createPublicClient({ chain, transport, pollingInterval: 50 });
  const deploy = async (c: Compiled, args: unknown[]) => {
    const hash = await deployer.deployContract({ abi: c.abi, bytecode: c.bytecode, args });
    const receipt = await reader.waitForTransactionReceipt({ hash });
    return receipt.contractAddress as Hex;
  };
  const mc = await deploy(multicall, []);
  await anvil.rpc('anvil_setCode', [MULTICALL3_ADDRESS, await reader.getCode({ address: mc })]);
  const address = await deploy(token, [TOKEN_NAME, TOKEN_VERSION]);
  const accounts = Array.from({ length: payers }, () => privateKeyToAccount(generatePrivateKey()));
  for (const a of accounts) {
    const hash = await deployer.writeContract({ address, abi: token.abi, functionName: 'mint', args: [a.address, funds] });
    await reader.waitForTransactionReceipt({ hash });
  }
  const read = (functionName: string, args: unknown[]) => reader.readContract({ address, abi: token.abi, functionName, args });
  return {
    chainId: anvil.chainId,
    network: `eip155:${anvil.chainId}`,
    token: address,
    tokenAbi: token.abi,
    payTo: privateKeyToAccount(generatePrivateKey()).address,
    payers: accounts,
    broke: privateKeyToAccount(generatePrivateKey()),
    balanceOf: async (a) => (await read('balanceOf', [a])) as bigint,
    used: async (from, nonce) => (await read('authorizationState', [from, nonce])) as boolean,
  };
}

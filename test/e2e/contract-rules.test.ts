/**
 * Contract and selector rules (contract-rules plugin), end to end on anvil with viem as caller:
 * a project's and a network's rules allow or deny contract addresses and 4-byte selectors for
 * `eth_call`, `eth_estimateGas`, `eth_sendRawTransaction` (decoded from the signed bytes) and
 * `eth_getLogs` and `eth_newFilter` (whose polls read the filter's logs), for every caller or for some users (API keys, secrets); a refused call gets
 * ErrContractRuleRefused naming the rule, reaches no upstream, and the other calls of its batch
 * are served.
 */
import { expect } from 'chai';
import { encodeFunctionData, erc20Abi } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const TOKEN = '0x1111111111111111111111111111111111111111';
const OTHER = '0x2222222222222222222222222222222222222222';
const DENIED = '0x3333333333333333333333333333333333333333';
const transfer = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [OTHER, 1n] });
const approve = encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [OTHER, 1n] });

describe('e2e: contract and selector rules', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  const path = `/main/evm/${CHAIN}`;
  const rpc = (method: string, params: unknown[], id = 1) => ({ jsonrpc: '2.0', id, method, params });
  const as = (token: string) => ({ 'X-SVC-Secret-Token': token });

  before(async () => {
    anvil = await startAnvil();
    svc = await startSvc({
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          auth: {
            strategies: [
              { type: 'secret', secret: { value: 'partner-token', id: 'partner-1' } },
              { type: 'secret', secret: { value: 'ops-token', id: 'ops' } },
              { type: 'secret', secret: { value: 'logs-token', id: 'logs-reader' } },
            ],
          },
          contractRules: [
            {
              name: 'partners call the token',
              users: ['partner-*'],
              methods: ['eth_call', 'eth_estimateGas', 'eth_sendRawTransaction'],
              allowContracts: [TOKEN],
              allowSelectors: ['0xa9059cbb'],
            },
            { name: 'logs of the token only', users: ['logs-*'], methods: ['eth_getLogs'], allowContracts: [TOKEN] },
          ],
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, contractRules: [{ name: 'sanctioned', denyContracts: [DENIED] }] }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN } }],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  it('a partner may call transfer on the token; another contract or function is refused by name, with no upstream call', async () => {
    const ok = await svc.post(path, rpc('eth_call', [{ to: TOKEN, data: transfer }, 'latest']), as('partner-token'));
    expect(ok.json.result, ok.text).to.equal('0x');
    const other = await svc.post(path, rpc('eth_call', [{ to: OTHER, data: transfer }, 'latest']), as('partner-token'));
    expect(other.status).to.equal(200);
    expect(other.json.error.code).to.equal(-32602);
    expect(other.json.error.message).to.equal(`eth_call refused by contract rule "partners call the token": the contract is not allowed (${OTHER})`);
    expect(other.headers['x-svc-error']).to.equal('ErrContractRuleRefused');
    expect(other.headers['x-svc-upstream-attempts']).to.equal('0');
    const fn = await svc.post(path, rpc('eth_estimateGas', [{ to: TOKEN, data: approve }]), as('partner-token'));
    expect(fn.json.error.message).to.match(/the function selector is not allowed \(selector 0x095ea7b3\)/);
    const creation = await svc.post(path, rpc('eth_call', [{ data: transfer }, 'latest']), as('partner-token'));
    expect(creation.json.error.message).to.match(/a contract creation/);
  });

  it('the partner rule does not apply to other users; the network rule applies to everyone', async () => {
    const ops = await svc.post(path, rpc('eth_call', [{ to: OTHER, data: approve }, 'latest']), as('ops-token'));
    expect(ops.json.result, ops.text).to.equal('0x');
    for (const token of ['ops-token', 'partner-token']) {
      const denied = await svc.post(path, rpc('eth_call', [{ to: DENIED, data: transfer }, 'latest']), as(token));
      expect(denied.json.error?.message, token).to.match(/refused by contract rule "(sanctioned|partners call the token)"/);
    }
    const denied = await svc.post(path, rpc('eth_call', [{ to: DENIED, data: transfer }, 'latest']), as('ops-token'));
    expect(denied.headers['x-svc-error']).to.equal('ErrContractRuleRefused');
  });

  it('eth_getLogs: every address of the filter is checked (selectors do not apply)', async () => {
    const denied = await svc.post(path, rpc('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x0', address: [TOKEN, DENIED] }]), as('ops-token'));
    expect(denied.json.error.message).to.equal(`eth_getLogs refused by contract rule "sanctioned": the contract is denied (${DENIED})`);
    const fine = await svc.post(path, rpc('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x0', address: TOKEN }]), as('ops-token'));
    expect(fine.json.result).to.deep.equal([]);
  });

  it('eth_newFilter is checked like eth_getLogs (a rule naming eth_getLogs covers it): a filter its polls could not read through eth_getLogs is never made', async () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ['logs-token', { address: OTHER }, /eth_newFilter refused by contract rule "logs of the token only": the contract is not allowed/],
      ['logs-token', {}, /a filter without an address matches every contract/],
      ['logs-token', { address: [TOKEN, OTHER] }, /the contract is not allowed \(0x2222/],
      ['ops-token', { address: DENIED }, /eth_newFilter refused by contract rule "sanctioned": the contract is denied/],
    ];
    for (const [token, filter, why] of cases) {
      const r = await svc.post(path, rpc('eth_newFilter', [filter]), as(token));
      expect(r.json.error?.message, JSON.stringify(filter)).to.match(why);
      expect(r.headers['x-svc-error']).to.equal('ErrContractRuleRefused');
    }
    const made = await svc.post(path, rpc('eth_newFilter', [{ address: TOKEN, fromBlock: '0x0' }]), as('logs-token'));
    expect(made.json.result, made.text).to.match(/^0x[0-9a-f]{32}$/);
    const logs = await svc.post(path, rpc('eth_getFilterLogs', [made.json.result]), as('logs-token'));
    expect(logs.json.result, logs.text).to.deep.equal([]);
    const changes = await svc.post(path, rpc('eth_getFilterChanges', [made.json.result]), as('logs-token'));
    expect(changes.json.result, changes.text).to.deep.equal([]);
  });

  it('eth_sendRawTransaction: to and selector decoded from the signed transaction; undecodable bytes are refused', async () => {
    const account = privateKeyToAccount(KEY);
    const sign = (to: `0x${string}`, data: `0x${string}`, nonce: number) =>
      account.signTransaction({ chainId: CHAIN, type: 'eip1559', to, data, nonce, gas: 100_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1n });
    const refused = await svc.post(path, rpc('eth_sendRawTransaction', [await sign(OTHER, transfer, 0)]), as('partner-token'));
    expect(refused.json.error.message).to.match(/eth_sendRawTransaction refused by contract rule "partners call the token": the contract is not allowed/);
    const sent = await svc.post(path, rpc('eth_sendRawTransaction', [await sign(TOKEN, transfer, 0)]), as('partner-token'));
    expect(sent.json.result, sent.text).to.match(/^0x[0-9a-f]{64}$/);
    const garbage = await svc.post(path, rpc('eth_sendRawTransaction', ['0x1234']), as('partner-token'));
    expect(garbage.json.error.message).to.match(/cannot be decoded/);
  });

  it('no way around a rule: another transaction method, data and input that differ, overrides, a bundle, a simulation', async () => {
    const account = privateKeyToAccount(KEY);
    const raw = await account.signTransaction({
      chainId: CHAIN,
      type: 'eip1559',
      to: OTHER,
      data: transfer,
      nonce: 9,
      gas: 100_000n,
      maxFeePerGas: 10_000_000_000n,
      maxPriorityFeePerGas: 1n,
    });
    const cases: Array<[string, unknown[], RegExp]> = [
      ['eth_sendRawTransactionSync', [raw], /the contract is not allowed/],
      ['eth_sendBundle', [{ txs: [raw], blockNumber: '0x10' }], /the contract is not allowed/],
      ['eth_sendPrivateTransaction', [{ tx: raw }], /the contract is not allowed/],
      ['eth_call', [{ to: TOKEN, data: transfer, input: approve }, 'latest'], /`data` and `input` differ/],
      ['eth_call', [{ to: TOKEN, data: transfer }, 'latest', { [TOKEN]: { code: '0x00' } }], /overrides are set/],
      ['eth_estimateGas', [{ to: TOKEN, input: approve }], /the function selector is not allowed/],
      ['eth_simulateV1', [{ blockStateCalls: [] }, 'latest'], /cannot check/],
      ['eth_sendTransaction', [{ to: TOKEN, data: transfer }], /cannot check/],
    ];
    for (const [method, params, message] of cases) {
      const res = await svc.post(path, rpc(method, params), as('partner-token'));
      expect(res.json.error?.message, `${method} ${res.text}`).to.match(message);
      expect(res.headers['x-svc-upstream-attempts'], method).to.equal('0');
    }
    // trace_filter's toAddress is checked like a log filter's address.
    const traces = await svc.post(path, rpc('trace_filter', [{ fromBlock: '0x0', toBlock: '0x0', toAddress: [DENIED] }]), as('ops-token'));
    expect(traces.json.error.message).to.match(/contract rule "sanctioned": the contract is denied/);
  });

  it('a refused call in a batch does not stop the others', async () => {
    const res = await svc.post(
      path,
      [
        rpc('eth_call', [{ to: DENIED, data: transfer }, 'latest'], 1),
        rpc('eth_call', [{ to: TOKEN, data: transfer }, 'latest'], 2),
        rpc('eth_chainId', [], 3),
      ],
      as('partner-token'),
    );
    const byId = new Map((res.json as { id: number; result?: unknown; error?: { code: number } }[]).map((r) => [r.id, r]));
    expect(byId.get(1)?.error?.code).to.equal(-32602);
    expect(byId.get(2)?.result).to.equal('0x');
    expect(byId.get(3)?.result).to.equal('0x7a69');
  });
});

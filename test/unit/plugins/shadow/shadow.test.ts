/**
 * The shadow plugin's parts: its settings and defaults, the methods never
 * copied, the canonical comparison and its first differing field, and the bounded runner that
 * keeps copies off the request path and drops them under pressure.
 */
import { expect } from 'chai';
import {
  compareResults,
  MAX_IGNORE_METHODS,
  MAX_IGNORE_PATH_LENGTH,
  MAX_IGNORE_PATHS,
  MAX_SHADOW_METHODS_LENGTH,
  mirrorable,
  shadowSettingsOf,
  ShadowRunner,
} from '../../../../plugins/shadow/index.ts';

describe('shadow: settings', () => {
  it('is off without the object or with enabled false, on with defaults once present', () => {
    expect(shadowSettingsOf(undefined)).to.equal(undefined);
    expect(shadowSettingsOf({ enabled: false, sampleRate: 1 })).to.equal(undefined);
    const s = shadowSettingsOf({});
    expect(s?.sampleRate).to.equal(1);
    expect(s?.methods).to.equal('*');
    expect(s?.matches('eth_anything')).to.equal(true);
  });

  it('matches `|`-separated globs, spaces around them ignored', () => {
    const s = shadowSettingsOf({ methods: 'eth_get* | eth_call' })!;
    expect(s.matches('eth_getBalance')).to.equal(true);
    expect(s.matches('eth_call')).to.equal(true);
    expect(s.matches('eth_blockNumber')).to.equal(false);
    expect(s.matches('eth_callMany')).to.equal(false);
  });

  it('clamps the sample rate and bounds the pattern', () => {
    expect(shadowSettingsOf({ sampleRate: 7 })?.sampleRate).to.equal(1);
    expect(shadowSettingsOf({ sampleRate: -1 })?.sampleRate).to.equal(0);
    expect(shadowSettingsOf({ methods: 'x'.repeat(5000) })?.methods.length).to.equal(MAX_SHADOW_METHODS_LENGTH);
  });
});

describe('shadow: methods never copied', () => {
  it('skips writes, signatures, subscriptions, filters and dev-chain control', () => {
    for (const m of [
      'eth_sendRawTransaction',
      'eth_sendTransaction',
      'eth_signTypedData_v4',
      'eth_subscribe',
      'eth_newFilter',
      'eth_getFilterChanges',
      'anvil_setBalance',
      'evm_mine',
      'personal_sign',
      'debug_setHead',
    ]) {
      expect(mirrorable(m), m).to.equal(false);
    }
    for (const m of ['eth_getBalance', 'eth_call', 'eth_getLogs', 'debug_traceTransaction', 'eth_blockNumber']) expect(mirrorable(m), m).to.equal(true);
  });
});

describe('shadow: comparison', () => {
  it('ignores key order, hex letter case and leading zeros of quantities', () => {
    const a = { blockNumber: '0x01', hash: `0x${'AB'.repeat(32)}`, status: '0x1' };
    const b = { status: '0x1', hash: `0x${'ab'.repeat(32)}`, blockNumber: '0x1' };
    expect(compareResults('eth_getTransactionReceipt', a, b, true)).to.deep.equal({ outcome: 'match' });
  });

  it("drops the method's ignore fields (blockTimestamp of receipts and logs)", () => {
    const a = { status: '0x1', blockTimestamp: '0x10', logs: [{ data: '0x', blockTimestamp: '0x10' }] };
    const b = { status: '0x1', logs: [{ data: '0x' }] };
    expect(compareResults('eth_getTransactionReceipt', a, b, true).outcome).to.equal('match');
    // Another method keeps them.
    expect(compareResults('eth_getBlockByNumber', a, b, false).outcome).to.equal('mismatch');
  });

  it('names the first differing field only when asked', () => {
    const a = { status: '0x1', logs: [{ data: '0x01' }, { data: '0x02' }] };
    const b = { status: '0x1', logs: [{ data: '0x01' }, { data: '0x03' }] };
    expect(compareResults('eth_getTransactionReceipt', a, b, true)).to.deep.equal({ outcome: 'mismatch', field: '$.logs[1].data' });
    expect(compareResults('eth_getTransactionReceipt', a, b, false)).to.deep.equal({ outcome: 'mismatch' });
    expect(compareResults('eth_getBalance', '0x1', '0x2', true)).to.deep.equal({ outcome: 'mismatch', field: '$' });
  });
});

describe('shadow: runner', () => {
  const tick = () => new Promise<void>((r) => setImmediate(r));

  it('starts a job only after the current callbacks, never synchronously', async () => {
    const runner = new ShadowRunner(2);
    let ran = false;
    expect(
      runner.offer(async () => {
        ran = true;
      }),
    ).to.equal(true);
    expect(ran).to.equal(false);
    await runner.idle();
    expect(ran).to.equal(true);
  });

  it('drops a job beyond the bound and frees the slot when one settles', async () => {
    const runner = new ShadowRunner(2);
    const releases: Array<() => void> = [];
    const job = () => new Promise<void>((r) => releases.push(r));
    expect(runner.offer(job)).to.equal(true);
    expect(runner.offer(job)).to.equal(true);
    expect(runner.offer(job), 'third offer').to.equal(false);
    expect(runner.inFlight).to.equal(2);
    await tick();
    releases.shift()!();
    await tick();
    expect(runner.inFlight).to.equal(1);
    expect(runner.offer(job)).to.equal(true);
    await tick();
    for (const r of releases) r();
    await runner.idle();
    expect(runner.inFlight).to.equal(0);
  });

  it('keeps a throwing job from escaping and frees its slot', async () => {
    const seen: unknown[] = [];
    const runner = new ShadowRunner(1, (e) => seen.push(e));
    runner.offer(async () => {
      throw new Error('bug');
    });
    await runner.idle();
    expect(seen).to.have.length(1);
    expect(runner.offer(async () => undefined)).to.equal(true);
  });

  it('on close refuses new jobs, skips scheduled ones and waits for running ones at most the grace', async () => {
    const runner = new ShadowRunner(4);
    let skippedRan = false;
    runner.offer(async () => {
      skippedRan = true;
    });
    await runner.close(1000);
    expect(skippedRan, 'a job scheduled before close').to.equal(false);
    expect(runner.offer(async () => undefined)).to.equal(false);

    const stuck = new ShadowRunner(1);
    stuck.offer(() => new Promise<void>(() => undefined));
    await tick();
    const t0 = Date.now();
    await stuck.close(50);
    expect(Date.now() - t0).to.be.within(40, 500);
  });

  it('rejects a bound that is not a positive integer', () => {
    expect(() => new ShadowRunner(0)).to.throw(RangeError);
  });
});

describe('shadow: config schema', () => {
  const config = (shadow: unknown) => ({
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
        upstreams: [{ id: 's', endpoint: 'http://127.0.0.1:1', evm: { chainId: 1 }, shadow }],
      },
    ],
  });

  it('accepts `upstreams[].shadow` and rejects a rate above 1, an empty pattern or an unknown key', async () => {
    const { createProxy } = await import('../../../../core/host/create.ts');
    const { createLogger } = await import('../../../../lib/logger.ts');
    const { defaultPreset } = await import('../../../../presets/default.ts');
    const make = (shadow: unknown) => createProxy({ config: config(shadow), plugins: defaultPreset(), logger: createLogger('silent') });
    expect(() => make({ sampleRate: 0.25, methods: 'eth_get*|eth_call' })).to.not.throw();
    expect(() => make({})).to.not.throw();
    expect(() => make({ sampleRate: 2 })).to.throw(/sampleRate/);
    expect(() => make({ methods: '' })).to.throw(/methods/);
    expect(() => make({ sample: 1 })).to.throw(/sample/);
    expect(() => make({ methods: 'x'.repeat(MAX_SHADOW_METHODS_LENGTH + 1) })).to.throw(/methods/);
  });

  it('drops shadows before the selection policy sees the candidates', async () => {
    const { createProxy } = await import('../../../../core/host/create.ts');
    const { createLogger } = await import('../../../../lib/logger.ts');
    const { defaultPreset } = await import('../../../../presets/default.ts');
    const p = createProxy({ config: config({}), plugins: defaultPreset(), logger: createLogger('silent') });
    expect(p.hooks.select.taps.map((t) => t.name).slice(0, 2)).to.deep.equal(['shadow', 'selection']);
  });
});

describe("shadow: ignoreFields (eRPC's shadow.ignoreFields)", () => {
  const block = (timestamp: string, extra: Record<string, unknown> = {}) => ({ number: '0x1', timestamp, ...extra });

  it('drops the listed fields of that method from both answers before comparing', () => {
    const { ignore } = shadowSettingsOf({ ignoreFields: { eth_getBlockByNumber: ['timestamp'] } })!;
    expect(compareResults('eth_getBlockByNumber', block('0x10'), block('0x11'), true, ignore)).to.deep.equal({ outcome: 'match' });
    // Another method is compared whole.
    expect(compareResults('eth_getBlockByHash', block('0x10'), block('0x11'), true, ignore)).to.deep.equal({ outcome: 'mismatch', field: '$.timestamp' });
    // A field not listed still counts.
    expect(compareResults('eth_getBlockByNumber', block('0x10', { miner: '0x1' }), block('0x11', { miner: '0x2' }), true, ignore).outcome).to.equal('mismatch');
  });

  it('reads dot paths with `*` for every array element or object key, at any depth', () => {
    const { ignore } = shadowSettingsOf({
      ignoreFields: {
        eth_getLogs: ['*.blockTimestamp'],
        eth_getBlockReceipts: ['*.l1Fee', '*.logs.*.blockTimestamp'],
        eth_getBlockByNumber: ['transactions.*.yParity'],
      },
    })!;
    const logs = (t: string) => [
      { address: '0xa', blockTimestamp: t },
      { address: '0xb', blockTimestamp: t },
    ];
    expect(compareResults('eth_getLogs', logs('0x1'), logs('0x2'), false, ignore).outcome).to.equal('match');
    const receipts = (fee: string, t: string) => [{ status: '0x1', l1Fee: fee, logs: [{ data: '0x', blockTimestamp: t }] }];
    expect(compareResults('eth_getBlockReceipts', receipts('0x5', '0x1'), receipts('0x6', '0x2'), false, ignore).outcome).to.equal('match');
    const txs = (y: string, v: string) => ({ transactions: [{ hash: '0x1', yParity: y, v }] });
    expect(compareResults('eth_getBlockByNumber', txs('0x0', '0x1b'), txs('0x1', '0x1b'), false, ignore).outcome).to.equal('match');
    expect(compareResults('eth_getBlockByNumber', txs('0x0', '0x1b'), txs('0x0', '0x1c'), false, ignore).outcome).to.equal('mismatch');
  });

  it("a method listed uses exactly its own list, in place of the built-in blockTimestamp paths (eRPC's shadow has none)", () => {
    const receipt = (t: string, status: string) => ({ status, blockTimestamp: t });
    // Built-in: blockTimestamp of a receipt is ignored.
    expect(compareResults('eth_getTransactionReceipt', receipt('0x1', '0x1'), receipt('0x2', '0x1'), false).outcome).to.equal('match');
    const { ignore } = shadowSettingsOf({ ignoreFields: { eth_getTransactionReceipt: ['status'] } })!;
    expect(compareResults('eth_getTransactionReceipt', receipt('0x1', '0x1'), receipt('0x2', '0x1'), false, ignore).outcome).to.equal('mismatch');
    expect(compareResults('eth_getTransactionReceipt', receipt('0x1', '0x0'), receipt('0x1', '0x1'), false, ignore).outcome).to.equal('match');
    // An upstream without ignoreFields keeps the built-in lists.
    expect(shadowSettingsOf({})!.ignore.size).to.equal(0);
  });

  it('is bounded by the schema: methods, paths per method and their length; a path with an empty segment is refused', async () => {
    const { createProxy } = await import('../../../../core/host/create.ts');
    const { createLogger } = await import('../../../../lib/logger.ts');
    const { defaultPreset } = await import('../../../../presets/default.ts');
    const make = (ignoreFields: unknown) =>
      createProxy({
        config: {
          projects: [
            {
              id: 'main',
              networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
              upstreams: [{ id: 's', endpoint: 'http://127.0.0.1:1', evm: { chainId: 1 }, shadow: { ignoreFields } }],
            },
          ],
        },
        plugins: defaultPreset(),
        logger: createLogger('silent'),
      });
    expect(() => make({ eth_getLogs: ['*.blockTimestamp'], eth_getBlockByNumber: ['timestamp', 'transactions.*.v'] })).to.not.throw();
    expect(() => make({ eth_getLogs: 'blockTimestamp' })).to.throw(/ignoreFields/);
    expect(() => make({ eth_getLogs: ['a..b'] })).to.throw(/ignoreFields/);
    expect(() => make({ eth_getLogs: ['x'.repeat(MAX_IGNORE_PATH_LENGTH + 1)] })).to.throw(/ignoreFields/);
    expect(() => make({ eth_getLogs: Array.from({ length: MAX_IGNORE_PATHS + 1 }, (_, i) => `f${i}`) })).to.throw(/ignoreFields/);
    expect(() => make(Object.fromEntries(Array.from({ length: MAX_IGNORE_METHODS + 1 }, (_, i) => [`m${i}`, ['a']])))).to.throw(/ignoreFields/);
  });
});

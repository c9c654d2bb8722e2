/**
 * eRPC's consensus keys svc honours: `preferHighestValueFor` (numeric grouping, highest value at
 * the threshold, tie-breaking fields, dispute), `misbehaviorsDestination` (eRPC's record, file
 * names, the size bounds), and the schema of these keys with `fireAndForget` and `disputeLogLevel`.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { AttemptHandler, CallContext, Leg, SchemaFragment, Upstream } from 'svc-proxy/plugin';
import { decide, fieldValues, fileNameOf, MisbehaviorExporter, numericValue, recordOf, runSlots, type Vote } from '../../../../plugins/consensus/index.ts';
import { voteOf } from '../../../../plugins/consensus/round.ts';
import { DEFAULT_CONSENSUS, type ConsensusConfig } from '../../../../plugins/consensus/schema.ts';
import { RpcResult } from '../../../../core/plugin-api.ts';
import { ErrConsensusDispute } from '../../../../core/plugin-errors.ts';
import { loadConfigObject } from '../../../../config/load.ts';
import { defaultPreset } from '../../../../presets/default.ts';
import { problemsOf } from '../../../helpers/config-problems.ts';

const cfg = (over: Partial<ConsensusConfig> = {}): ConsensusConfig => ({ ...DEFAULT_CONSENSUS, ...over });
const vote = (upstreamId: string, result: unknown): Vote => voteOf(upstreamId, { result: new RpcResult(result) }, []) as Vote;

describe("consensus: eRPC's preferHighestValueFor", () => {
  const highest = (threshold: number, fields: Record<string, string[]> = { eth_getTransactionCount: ['result'] }) =>
    cfg({ agreementThreshold: threshold, preferHighestValueFor: fields });

  it('reads hex, decimal strings and numbers alike; anything else is no value', () => {
    expect(numericValue('0x1f')).to.equal(31n);
    expect(numericValue('31')).to.equal(31n);
    expect(numericValue(31.9)).to.equal(31n);
    expect(numericValue('0x')).to.equal(undefined);
    expect(numericValue('abc')).to.equal(undefined);
    expect(numericValue(`0x${'f'.repeat(65)}`)).to.equal(undefined);
    expect(fieldValues({ a: '0x2', b: 3 }, ['a', 'b'])).to.deep.equal([2n, 3n]);
    expect(fieldValues({ a: '0x2' }, ['a', 'b'])).to.equal(undefined);
    expect(fieldValues('0x5', ['result'])).to.deep.equal([5n]);
  });

  it('the highest value wins over the majority (threshold 1), from any formatting of it', () => {
    const votes = [vote('a', '0x5'), vote('b', '0x5'), vote('c', '0x07'), vote('d', '0x6')];
    const d = decide({ votes, infraErrors: [], cfg: highest(1), participants: 4, method: 'eth_getTransactionCount' });
    expect(d.outcome).to.equal('agreement');
    expect(d.winner!.upstreamId).to.equal('c');
    // Another method keeps the majority rule.
    expect(decide({ votes, infraErrors: [], cfg: highest(1), participants: 4, method: 'eth_gasPrice' }).winner!.result!.result).to.equal('0x5');
  });

  it('with threshold 2, the highest value at least two answers share wins; "0x7" and "0x07" agree', () => {
    const votes = [vote('a', '0x5'), vote('b', '0x5'), vote('c', '0x9'), vote('d', '0x7'), vote('e', '0x07')];
    const d = decide({ votes, infraErrors: [], cfg: highest(2), participants: 5, method: 'eth_getTransactionCount' });
    expect(d.winningGroup!.votes.map((v) => v.upstreamId)).to.deep.equal(['d', 'e']);
    expect(d.winner!.upstreamId).to.equal('e'); // the larger answer
  });

  it('no value shared by the threshold is a dispute', () => {
    const votes = [vote('a', '0x1'), vote('b', '0x2'), vote('c', '0x3')];
    const d = decide({ votes, infraErrors: [], cfg: highest(2), participants: 3, method: 'eth_getTransactionCount' });
    expect(d.outcome).to.equal('dispute');
    expect(d.error).to.be.instanceOf(ErrConsensusDispute);
  });

  it('later fields break ties of earlier ones; answers without the fields fall to the other rules', () => {
    const fields = { eth_getBlockByNumber: ['number', 'timestamp'] };
    const votes = [
      vote('a', { number: '0x10', timestamp: '0x5' }),
      vote('b', { number: '0x10', timestamp: '0x6' }),
      vote('c', { number: '0xf', timestamp: '0x9' }),
    ];
    expect(decide({ votes, infraErrors: [], cfg: highest(1, fields), participants: 3, method: 'eth_getBlockByNumber' }).winner!.upstreamId).to.equal('b');
    const none = [vote('a', { x: 1 }), vote('b', { x: 1 }), vote('c', { x: 2 })];
    const d = decide({ votes: none, infraErrors: [], cfg: highest(2, fields), participants: 3, method: 'eth_getBlockByNumber' });
    expect(d.winningGroup!.votes.map((v) => v.upstreamId)).to.deep.equal(['a', 'b']);
  });
});

describe("consensus: eRPC's misbehaviorsDestination", () => {
  const ctx = {
    project: { id: 'main' },
    network: { id: 'evm:1' },
    request: { method: 'eth_getBalance', params: ['0xabc', 'latest'] },
    state: new Map(),
    slots: undefined,
  } as unknown as CallContext;
  const votes = [vote('a', '0x1'), vote('b', '0x1'), vote('c', '0x2')];
  const d = decide({ votes, infraErrors: [], cfg: cfg(), participants: 3 });
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'svc-misbehaviors-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("names files with eRPC's tokens, made safe for the file system, .jsonl appended", () => {
    const at = Date.UTC(2026, 0, 2, 3, 4, 5);
    expect(fileNameOf('{timestampMs}-{method}-{networkId}', at, 'eth_call', 'evm:1', 'pod-1')).to.equal(`${at}-eth_call-evm_1.jsonl`);
    expect(fileNameOf('{dateByHour}-{instanceId}', at, 'm', 'n', 'pod/1')).to.equal('2026-01-02-03-pod_1.jsonl');
    expect(fileNameOf('{dateByDay}.log', at, 'm', 'n', 'i')).to.equal('2026-01-02.log');
    expect(fileNameOf('../{method}', at, '../../etc', 'n', 'i')).to.not.include('/');
  });

  it("writes eRPC's record: ts, ids, method, policy, request, winner, analysis, participants", () => {
    const line = recordOf(ctx, cfg(), d, votes, 0, 1 << 20)!;
    const r = JSON.parse(line);
    expect(r).to.include.keys('ts', 'projectId', 'networkId', 'method', 'finality', 'policy', 'request', 'winner', 'analysis', 'participants');
    expect(r.projectId).to.equal('main');
    expect(r.winner.upstreamId).to.be.oneOf(['a', 'b']);
    expect(r.analysis.groups.map((g: { count: number }) => g.count)).to.deep.equal([2, 1]);
    expect(r.participants.map((p: { upstreamId: string; response: unknown }) => [p.upstreamId, p.response])).to.deep.equal([
      ['a', '0x1'],
      ['b', '0x1'],
      ['c', '0x2'],
    ]);
    expect(r.request.params).to.deep.equal(['0xabc', 'latest']);
  });

  it('cuts the largest responses to keep a record under maxRecordSize', () => {
    const big = [vote('a', 'x'.repeat(5000)), vote('b', 'y'.repeat(4000)), vote('c', '0x2')];
    const dd = decide({ votes: big, infraErrors: [], cfg: cfg({ agreementThreshold: 1 }), participants: 3 });
    const line = recordOf(ctx, cfg(), dd, big, 0, 3000)!;
    expect(Buffer.byteLength(line)).to.be.at.most(3000);
    const r = JSON.parse(line);
    expect(r.participants.filter((p: { responseTruncated?: boolean }) => p.responseTruncated)).to.have.length(2);
    expect(r.participants[2].response).to.equal('0x2');
  });

  it('appends to the directory (created) and drops what exceeds maxTotalSize, counted', async () => {
    const drops: string[] = [];
    const target = join(dir, 'nested');
    const one = Buffer.byteLength(recordOf(ctx, cfg(), d, votes, 0, 1 << 20)!);
    const e = new MisbehaviorExporter(
      { path: target, filePattern: 'all', maxRecordSize: 1 << 20, maxTotalSize: one * 2 + 10 },
      (r) => drops.push(r),
      () => {},
    );
    expect(e.offer(ctx, cfg(), d, votes, 0)).to.equal(true);
    expect(e.offer(ctx, cfg(), d, votes, 0)).to.equal(true);
    expect(e.offer(ctx, cfg(), d, votes, 0)).to.equal(false);
    await e.flush();
    expect(drops).to.deep.equal(['total_size']);
    expect(readdirSync(target)).to.deep.equal(['all.jsonl']);
    const lines = readFileSync(join(target, 'all.jsonl'), 'utf8').trim().split('\n');
    expect(lines).to.have.length(2);
    for (const l of lines) expect(JSON.parse(l).method).to.equal('eth_getBalance');
  });

  it('a write failure is counted and logged, never thrown', async () => {
    const drops: string[] = [];
    const warns: string[] = [];
    // A file where the directory should be: mkdir fails.
    writeFileSync(join(dir, 'file'), 'x');
    const e = new MisbehaviorExporter(
      { path: join(dir, 'file', 'sub') },
      (r) => drops.push(r),
      (m) => warns.push(m),
    );
    e.offer(ctx, cfg(), d, votes, 0);
    await e.flush();
    expect(drops).to.deep.equal(['write_error']);
    expect(warns[0]).to.match(/cannot write/);
    expect(
      () =>
        new MisbehaviorExporter(
          { path: 'relative/dir' },
          () => {},
          () => {},
        ),
    ).to.throw(/absolute/);
  });
});

describe("consensus: the schema of eRPC's keys", () => {
  const fragments = defaultPreset().flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));
  const load = (consensus: Record<string, unknown>) =>
    loadConfigObject(
      {
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 1 }, failsafe: [{ matchMethod: '*', consensus }] }],
            upstreams: [{ id: 'a', endpoint: 'http://127.0.0.1:1', evm: { chainId: 1 } }],
          },
        ],
      },
      { fragments },
    );
  const at = 'projects[0].networks[0].failsafe[0].consensus';

  it('accepts them with defaults; sizes in bytes', () => {
    const { config } = load({
      preferHighestValueFor: { eth_gasPrice: ['result'] },
      fireAndForget: true,
      disputeLogLevel: 'error',
      misbehaviorsDestination: { type: 'file', path: '/var/log/svc', maxRecordSize: '64KiB' },
    });
    const c = (config.projects[0]?.networks[0]?.settings.failsafe as Array<{ consensus: ConsensusConfig }>)[0]!.consensus;
    expect(c.fireAndForget).to.equal(true);
    expect(c.disputeLogLevel).to.equal('error');
    expect(c.misbehaviorsDestination).to.deep.include({ path: '/var/log/svc', maxRecordSize: 65536, filePattern: '{timestampMs}-{method}-{networkId}' });
  });

  it('refuses a relative path, an unknown level, S3 (naming the alternative) and an empty field list', () => {
    const paths = (c: Record<string, unknown>) => problemsOf(() => load(c)).map((p) => `${p.path}: ${p.message}`);
    expect(paths({ misbehaviorsDestination: { path: 'logs' } }).join('\n')).to.include(`${at}.misbehaviorsDestination.path`);
    expect(paths({ disputeLogLevel: 'loud' }).join('\n')).to.include(`${at}.disputeLogLevel`);
    expect(paths({ misbehaviorsDestination: { path: '/x', s3: { maxRecords: 1 } } }).join('\n')).to.match(/to S3.*directory/);
    expect(paths({ preferHighestValueFor: { eth_gasPrice: [] } }).join('\n')).to.include(`${at}.preferHighestValueFor`);
  });
});

describe("consensus: eRPC's fireAndForget and the wait-for-all of preferHighestValueFor", () => {
  type Slot = { signal: AbortSignal; release: (v: string) => void };
  /** Three slots a, b, c: a and b answer 0x1 at once, c waits for the test. */
  async function round(opts: { fireAndForget?: boolean; waitAll?: boolean }, client = new AbortController()) {
    const slots = new Map<string, Slot>();
    const ups = ['a', 'b', 'c'].map((id) => ({ id })) as unknown as Upstream[];
    const inner = ((_ctx: CallContext, leg: { cursor: { next(): Upstream | undefined }; signal: AbortSignal }) => {
      const u = leg.cursor.next() as unknown as { id: string };
      if (u.id !== 'c') return Promise.resolve(new RpcResult('0x1'));
      return new Promise<RpcResult>((resolve, reject) => {
        slots.set(u.id, { signal: leg.signal, release: (v) => resolve(new RpcResult(v)) });
        leg.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      });
    }) as unknown as AttemptHandler;
    const ctx = { deadline: Date.now() + 10_000 } as unknown as CallContext;
    const leg = { signal: client.signal } as unknown as Leg;
    const done = runSlots(ctx, leg, ups, inner, cfg({ maxParticipants: 3, agreementThreshold: 2, preferLargerResponses: false }), [], opts);
    return { done, slots };
  }

  it('without it, the slot still running when two agree is aborted', async () => {
    const { done, slots } = await round({});
    const r = await done;
    expect(r.votes.map((v) => v.upstreamId)).to.deep.equal(['a', 'b']);
    expect(slots.get('c')!.signal.aborted).to.equal(true);
  });

  it('with it, that slot keeps running after the round is decided', async () => {
    const { done, slots } = await round({ fireAndForget: true });
    const r = await done;
    expect(r.votes.map((v) => v.upstreamId)).to.deep.equal(['a', 'b']);
    expect(slots.get('c')!.signal.aborted).to.equal(false);
    slots.get('c')!.release('0x2');
  });

  it('with it, a client gone ends the round (votes so far) but not the slot still running', async () => {
    const client = new AbortController();
    const { done, slots } = await round({ fireAndForget: true, waitAll: true }, client);
    await new Promise((r) => setImmediate(r));
    client.abort();
    expect((await done).votes.map((v) => v.upstreamId)).to.deep.equal(['a', 'b']);
    expect(slots.get('c')!.signal.aborted).to.equal(false);
    slots.get('c')!.release('0x2');
  });

  it('waitAll (preferHighestValueFor) awaits every slot', async () => {
    const { done, slots } = await round({ waitAll: true });
    let settled = false;
    void done.then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).to.equal(false);
    slots.get('c')!.release('0x2');
    expect((await done).votes.map((v) => v.upstreamId)).to.deep.equal(['a', 'b', 'c']);
  });
});

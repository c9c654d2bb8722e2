/**
 * The `admit` hook (docs/plugins.md, spec §5 item 1's pay per request rides on it): once a request's body is parsed and before any call
 * is served, a tap may refuse the whole request (with an answer of its own: status, headers, body), change who the calls run as, and
 * register tasks that run once every call answered, before the response is written. On a real server in front of an echo upstream.
 */
import { expect } from 'chai';
import { definePlugin, type Admission } from '../../../core/plugin-api.ts';
import { ErrAuthUnauthorized } from '../../../core/wire/errors.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { startEchoUpstream, type EchoUpstream } from '../../helpers/echo-upstream.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../../helpers/svc.ts';

describe('core: the admit hook', () => {
  let up: EchoUpstream;
  let svc: SvcHandle;
  const seen: { admissions: Admission[]; users: string[]; answered: string[][] } = { admissions: [], users: [], answered: [] };
  const admitPlugin = definePlugin({
    name: 'admit-test',
    apply(host) {
      host.hooks.callDone.tap('admit-test', (ctx) => void seen.users.push(ctx.identity?.userId ?? '-'));
      host.hooks.admit.tapPromise('admit-test', async (a) => {
        seen.admissions.push(a);
        const mode = a.http.headers['x-admit'];
        if (mode === 'answer') throw new ErrAuthUnauthorized('pay first', { answer: { body: '{"custom":true}', headers: { 'X-Challenge': 'yes' } } });
        if (mode === 'refuse') throw new ErrAuthUnauthorized('refused as a whole');
        a.identity = { userId: 'payer-1', strategy: 'test' };
        a.onAnswered((records, sink) => {
          seen.answered.push(records.map((r) => r.method));
          sink.set('X-Settled', String(records.length));
        });
        if (mode === 'throwing-task')
          a.onAnswered(() => {
            throw new Error('settlement bug');
          });
      });
    },
  });

  before(async () => {
    up = await startEchoUpstream();
    svc = await startSvc(
      {
        ...NO_CACHE,
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
            upstreams: [{ id: 'echo', endpoint: up.origin, evm: { chainId: 31337 } }],
          },
        ],
      },
      { plugins: [...defaultPreset(), admitPlugin] },
    );
  });
  after(async () => {
    await svc?.close();
    await up?.close();
  });
  beforeEach(() => {
    seen.admissions = [];
    seen.users = [];
    seen.answered = [];
  });
  const call = (id: number, method = 'echo_result') => ({ jsonrpc: '2.0', id, method, params: ['x'] });
  const reached = () => up.requests.filter((r) => r.methods.includes('echo_result')).length;

  it('sees the parsed calls before any is served; the calls run as the identity it set; its tasks run after all answered, in body order', async () => {
    const before = reached();
    const r = await svc.post('/main/evm/31337', [call(1), call(2, 'echo_result'), { jsonrpc: '2.0', id: 3 }]);
    expect(r.status).to.equal(200);
    expect(r.json).to.have.length(3);
    const a = seen.admissions[0]!;
    expect(a.batch).to.equal(true);
    expect(a.transport).to.equal('http');
    expect(a.network?.id).to.equal('evm:31337');
    expect(a.calls.map((c) => c.method)).to.deep.equal(['echo_result', 'echo_result', '']);
    expect(a.calls[2]!.invalid).to.not.equal(undefined);
    expect(seen.users.filter((u) => u === 'payer-1')).to.have.length(2);
    expect(seen.answered).to.deep.equal([['echo_result', 'echo_result', '']]);
    expect(r.headers['x-settled']).to.equal('3');
    expect(reached() - before).to.be.greaterThan(0);
  });

  it('a refusal with an answer of its own is written as it is, for a single call or a batch, and reaches no upstream', async () => {
    const before = reached();
    for (const body of [call(1), [call(1), call(2)]]) {
      const r = await svc.post('/main/evm/31337', body, { 'x-admit': 'answer' });
      expect(r.status).to.equal(401);
      expect(r.text).to.equal('{"custom":true}');
      expect(r.headers['x-challenge']).to.equal('yes');
      expect(r.headers['content-type']).to.equal('application/json');
    }
    expect(reached()).to.equal(before);
  });

  it('a refusal without one is the JSON-RPC error, one per element of a batch, with its HTTP status', async () => {
    const r = await svc.post('/main/evm/31337', [call(7), call(8)], { 'x-admit': 'refuse' });
    expect(r.status).to.equal(401);
    expect(r.json.map((e: { id: number; error: { message: string } }) => [e.id, e.error.message])).to.deep.equal([
      [7, 'refused as a whole'],
      [8, 'refused as a whole'],
    ]);
  });

  it('a task that throws is logged; the answer stands', async () => {
    const r = await svc.post('/main/evm/31337', call(1), { 'x-admit': 'throwing-task' });
    expect(r.status).to.equal(200);
    expect(r.json.result).to.be.a('string');
    expect(r.headers['x-settled']).to.equal('1');
  });
});

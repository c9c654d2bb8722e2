/**
 * Unit tests of the static-responses plugin (`networks[].staticResponses`, eRPC's key): the
 * matching rules (numbers by value across YAML and JSON, no hex normalisation, object keys in any
 * order, the empty params forms, first match wins), the answers (a result; an error the client
 * sees exactly as configured), the config checks, and the tap itself through a started proxy whose
 * upstream transport is an in-process script.
 */
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { toJsonRpcError } from '../../../core/wire/errors-wire.ts';
import { ConfigError, loadConfigObject } from '../../../config/load.ts';
import type { SchemaFragment } from '../../../config/schema.ts';
import { CallStage } from '../../../core/pipeline/stages.ts';
import { RpcResult } from '../../../core/wire/jsonrpc.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { presetWithout } from '../../helpers/svc.ts';
import { startStubProxy, type StubProxy } from '../../helpers/stub-proxy.ts';
import {
  answerOf,
  compileStaticResponses,
  ErrStaticResponse,
  findStaticResponse,
  isEmptyParams,
  jsonEqual,
  MAX_PARAMS_DEPTH,
  MAX_STATIC_RESPONSES,
  paramsMatch,
  type StaticResponseConfig,
} from '../../../plugins/static-responses/index.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));

/** Loads a config whose only network carries `network` keys; returns the problems (empty when it loads). */
function problemsOf(network: Record<string, unknown>, networkDefaults?: Record<string, unknown>): Array<{ path: string; message: string }> {
  try {
    loadConfigObject(
      { projects: [{ id: 'main', ...(networkDefaults ? { networkDefaults } : {}), networks: [{ evm: { chainId: 1 }, ...network }] }] },
      { fragments: FRAGMENTS, env: {} },
    );
    return [];
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
}

describe('static-responses: matching', () => {
  it('numbers compare by value: a YAML integer equals a JSON float (and a bigint), never a string holding it', () => {
    const fromYaml = (parseYaml('params: [1, 2.5, 100]') as { params: unknown[] }).params;
    expect(jsonEqual(fromYaml, JSON.parse('[1.0, 2.50, 1e2]'))).to.equal(true);
    expect(jsonEqual(1n, 1)).to.equal(true);
    expect(jsonEqual(1, '1')).to.equal(false);
    expect(jsonEqual('1', 1)).to.equal(false);
    expect(jsonEqual(0, false)).to.equal(false);
    expect(jsonEqual(0, null)).to.equal(false);
  });

  it('strings are compared as written: hex is not normalised, case matters', () => {
    expect(jsonEqual('0x1', '0x1')).to.equal(true);
    expect(jsonEqual('0x1', '0x01')).to.equal(false);
    expect(jsonEqual('0xAB', '0xab')).to.equal(false);
    expect(jsonEqual('latest', 'Latest')).to.equal(false);
  });

  it('objects match key by key in any order; arrays element by element; null only null', () => {
    const fromYaml = (parseYaml('params:\n  - { to: "0xabc", data: "0x01", gas: 21000 }\n  - latest\n') as { params: unknown[] }).params;
    expect(jsonEqual(fromYaml, JSON.parse('[{"data":"0x01","gas":21000.0,"to":"0xabc"},"latest"]'))).to.equal(true);
    expect(jsonEqual({ a: 1 }, { a: 1, b: 2 })).to.equal(false);
    expect(jsonEqual({ a: 1, b: 2 }, { a: 1 })).to.equal(false);
    expect(jsonEqual({ a: null }, { b: null })).to.equal(false);
    expect(jsonEqual([1, 2], [2, 1])).to.equal(false);
    expect(jsonEqual([1], { 0: 1 })).to.equal(false);
    expect(jsonEqual({}, [])).to.equal(false);
    expect(jsonEqual(null, null)).to.equal(true);
    expect(jsonEqual(null, undefined)).to.equal(true);
    expect(jsonEqual(null, 0)).to.equal(false);
    expect(jsonEqual([null], [null])).to.equal(true);
  });

  it('nesting beyond MAX_PARAMS_DEPTH never matches (bounded recursion)', () => {
    const nest = (n: number): unknown => (n === 0 ? 1 : [nest(n - 1)]);
    expect(jsonEqual(nest(MAX_PARAMS_DEPTH - 1), nest(MAX_PARAMS_DEPTH - 1))).to.equal(true);
    expect(jsonEqual(nest(MAX_PARAMS_DEPTH + 1), nest(MAX_PARAMS_DEPTH + 1))).to.equal(false);
  });

  it('empty params: omitted, null and [] all match one another, and nothing else', () => {
    const empties = [undefined, null, []];
    for (const c of empties) for (const s of empties) expect(paramsMatch(c, s), `${JSON.stringify(c)} vs ${JSON.stringify(s)}`).to.equal(true);
    for (const c of empties) {
      expect(paramsMatch(c, ['latest'])).to.equal(false);
      expect(paramsMatch(c, {})).to.equal(false);
      expect(paramsMatch(['latest'], c)).to.equal(false);
    }
    expect(isEmptyParams({})).to.equal(false);
    expect(paramsMatch({}, {})).to.equal(true);
  });

  it('the method is exact and case-sensitive; the first matching entry in config order wins', () => {
    const entries: StaticResponseConfig[] = [
      { method: 'eth_getBlockByNumber', params: ['0x0', false], response: { result: { number: '0x0', hash: '0xfirst' } } },
      { method: 'eth_maxPriorityFeePerGas', response: { result: '0x0' } },
      { method: 'eth_getBlockByNumber', params: ['0x0', false], response: { result: { number: '0x0', hash: '0xsecond' } } },
      { method: 'eth_getBlockByNumber', response: { error: { code: -32602, message: 'missing params' } } },
    ];
    const table = compileStaticResponses(entries)!;
    expect(findStaticResponse(table, 'eth_getBlockByNumber', JSON.parse('["0x0", false]'))?.index).to.equal(0);
    expect(findStaticResponse(table, 'eth_getBlockByNumber', ['0x00', false])).to.equal(undefined);
    expect(findStaticResponse(table, 'eth_getBlockByNumber', [])?.index).to.equal(3);
    expect(findStaticResponse(table, 'eth_getBlockByNumber', undefined)?.index).to.equal(3);
    expect(findStaticResponse(table, 'eth_maxPriorityFeePerGas', null)?.index).to.equal(1);
    expect(findStaticResponse(table, 'ETH_maxPriorityFeePerGas', [])).to.equal(undefined);
    expect(findStaticResponse(table, 'eth_maxPriorityFeePerGas ', [])).to.equal(undefined);
    expect(findStaticResponse(table, '__proto__', [])).to.equal(undefined);
    expect(findStaticResponse(table, 'constructor', [])).to.equal(undefined);
  });

  it('no entries: no table (the network is left alone)', () => {
    expect(compileStaticResponses(undefined)).to.equal(undefined);
    expect(compileStaticResponses([])).to.equal(undefined);
  });
});

describe('static-responses: answers', () => {
  it('a result is answered as configured, null included, as a fresh RpcResult per call', () => {
    const table = compileStaticResponses([
      { method: 'a', response: { result: { x: [1, '0x2'] } } },
      { method: 'b', response: { result: null } },
    ])!;
    const one = answerOf(findStaticResponse(table, 'a', [])!);
    const two = answerOf(findStaticResponse(table, 'a', [])!);
    expect(one).to.be.instanceOf(RpcResult);
    expect((one as RpcResult).json()).to.equal('{"x":[1,"0x2"]}');
    expect((one as RpcResult).result).to.deep.equal({ x: [1, '0x2'] });
    expect(one).to.not.equal(two);
    ((one as RpcResult).result as { x: unknown[] }).x.push('mutated');
    expect((two as RpcResult).result).to.deep.equal({ x: [1, '0x2'] });
    expect((answerOf(findStaticResponse(table, 'b', [])!) as RpcResult).json()).to.equal('null');
  });

  it('an error reaches the wire exactly as configured, with or without data, whatever includeErrorDetails says', () => {
    const table = compileStaticResponses([
      { method: 'eth_call', response: { error: { code: 3, message: 'execution reverted: nope', data: '0x08c379a0' } } },
      { method: 'eth_getProof', response: { error: { code: -32601, message: 'the method eth_getProof does not exist/is not available' } } },
      { method: 'x_data', response: { error: { code: -32000, message: 'm', data: { a: [1, null], b: 'é' } } } },
    ])!;
    for (const details of [true, false]) {
      const revert = answerOf(findStaticResponse(table, 'eth_call', [])!) as ErrStaticResponse;
      expect(revert).to.be.instanceOf(ErrStaticResponse);
      expect(revert.retryable).to.equal(false);
      expect(revert.httpStatus).to.equal(200);
      const w1 = toJsonRpcError(revert, 'eth_call', details);
      expect(JSON.parse(w1.raw!)).to.deep.equal({ code: 3, message: 'execution reverted: nope', data: '0x08c379a0' });
      const missing = answerOf(findStaticResponse(table, 'eth_getProof', [])!) as ErrStaticResponse;
      const w2 = toJsonRpcError(missing, 'eth_getProof', details);
      expect(w2.raw).to.equal('{"code":-32601,"message":"the method eth_getProof does not exist/is not available"}');
      expect(w2.data).to.equal(undefined);
      const w3 = toJsonRpcError(answerOf(findStaticResponse(table, 'x_data', [])!) as ErrStaticResponse, 'x_data', details);
      expect(JSON.parse(w3.raw!)).to.deep.equal({ code: -32000, message: 'm', data: { a: [1, null], b: 'é' } });
    }
  });
});

describe('static-responses: config', () => {
  it("eRPC's shape loads on a network and in networkDefaults (the network's list replaces the default one)", () => {
    const yaml = parseYaml(`
staticResponses:
  - method: eth_getBlockByNumber
    params: ["0x0", false]
    response:
      result: { number: "0x0", hash: "0x01" }
  - method: eth_maxPriorityFeePerGas
    response: { result: "0x0" }
  - method: eth_getProof
    params: []
    response:
      error: { code: -32601, message: "not available" }
  - method: x_named
    params: { a: 1 }
    response: { result: ~ }
`) as Record<string, unknown>;
    expect(problemsOf(yaml)).to.deep.equal([]);
    expect(problemsOf({}, yaml)).to.deep.equal([]);
    const loaded = loadConfigObject(
      {
        projects: [
          {
            id: 'main',
            networkDefaults: yaml,
            networks: [{ evm: { chainId: 1 } }, { evm: { chainId: 2 }, staticResponses: [{ method: 'a', response: { result: 1 } }] }],
          },
        ],
      },
      { fragments: FRAGMENTS, env: {} },
    );
    const nets = loaded.config.projects[0]!.networks;
    expect((nets[0]!.settings.staticResponses as unknown[]).length).to.equal(4);
    expect(nets[1]!.settings.staticResponses).to.deep.equal([{ method: 'a', response: { result: 1 } }]);
  });

  it('refuses an entry with both result and error, or neither, by path', () => {
    const both = problemsOf({ staticResponses: [{ method: 'a', response: { result: 1, error: { code: 1, message: 'm' } } }] });
    expect(both).to.deep.include({ path: 'projects[0].networks[0].staticResponses[0].response', message: 'set either result or error, not both' });
    const neither = problemsOf({ staticResponses: [{ method: 'a', response: {} }] });
    expect(neither.map((p) => p.path)).to.include('projects[0].networks[0].staticResponses[0].response');
    expect(neither.map((p) => p.message).join()).to.match(/set result .* or error/);
  });

  it('refuses scalar params, a bad error object, an empty or over-long method, unknown keys and too many entries', () => {
    expect(problemsOf({ staticResponses: [{ method: 'a', params: 'latest', response: { result: 1 } }] })).to.deep.include({
      path: 'projects[0].networks[0].staticResponses[0].params',
      message: 'params must be a list, an object or null (omit it, or write [], for a call without params)',
    });
    expect(problemsOf({ staticResponses: [{ method: 'a', params: 0, response: { result: 1 } }] }).map((p) => p.path)).to.include(
      'projects[0].networks[0].staticResponses[0].params',
    );
    expect(
      problemsOf({ staticResponses: [{ method: 'a', response: { error: { code: 1.5, message: 'm' } } }] })
        .map((p) => p.path)
        .join(),
    ).to.include('staticResponses[0].response.error.code');
    expect(problemsOf({ staticResponses: [{ method: 'a', response: { error: { code: 1 } } }] }).length).to.be.greaterThan(0);
    expect(problemsOf({ staticResponses: [{ method: '', response: { result: 1 } }] }).length).to.be.greaterThan(0);
    expect(problemsOf({ staticResponses: [{ method: 'm'.repeat(257), response: { result: 1 } }] }).length).to.be.greaterThan(0);
    expect(problemsOf({ staticResponses: [{ method: 'a', response: { result: 1 }, id: 1 }] }).length).to.be.greaterThan(0);
    const many = Array.from({ length: MAX_STATIC_RESPONSES + 1 }, (_, i) => ({ method: `m${i}`, response: { result: i } }));
    expect(problemsOf({ staticResponses: many }).length).to.be.greaterThan(0);
    expect(problemsOf({ staticResponses: many.slice(1) })).to.deep.equal([]);
  });
});

describe('static-responses: the call tap', function () {
  this.timeout(20_000);
  let h: StubProxy;
  before(async () => {
    h = await startStubProxy(
      { up: (method) => (method === 'eth_getBlockByNumber' ? { number: '0x0', hash: '0xfromupstream' } : '0x7a69') },
      presetWithout('evm-state'),
      {
        staticResponses: [
          { method: 'eth_getBlockByNumber', params: ['0x0', false], response: { result: { number: '0x0', hash: '0xstatic' } } },
          { method: 'eth_chainId', response: { result: '0x2a' } },
          { method: 'eth_getProof', response: { error: { code: -32601, message: 'not here' } } },
        ],
      },
    );
  });
  after(() => h.close());

  it('sits inside tracing and outside the local answers, multiplexing and the cache', () => {
    expect(CallStage.STATIC_RESPONSES).to.be.lessThan(CallStage.TRACING).and.greaterThan(CallStage.LOCAL_METHODS);
    expect(CallStage.LOCAL_METHODS).to.be.greaterThan(CallStage.MULTIPLEX).and.greaterThan(CallStage.CACHE);
  });

  it('a matching call is answered from config with no upstream attempt; a configured eth_chainId wins over the local one', async () => {
    h.calls.length = 0;
    const r = await h.run('eth_getBlockByNumber', ['0x0', false]);
    expect(r.result?.result).to.deep.equal({ number: '0x0', hash: '0xstatic' });
    expect(r.ctx.record.upstream).to.equal(undefined);
    expect(r.ctx.record.upstreamAttempts).to.equal(0);
    expect((await h.run('eth_chainId', [])).result?.result).to.equal('0x2a');
    const e = await h.run('eth_getProof', undefined);
    expect(e.error).to.be.instanceOf(ErrStaticResponse);
    expect(e.error?.code).to.equal(-32601);
    expect(h.calls).to.deep.equal([]);
  });

  it('a call whose params differ goes on to the upstream', async () => {
    h.calls.length = 0;
    const r = await h.run('eth_getBlockByNumber', ['0x00', false]);
    expect(r.result?.result).to.deep.equal({ number: '0x0', hash: '0xfromupstream' });
    expect(h.calls.map((c) => c.method)).to.deep.equal(['eth_getBlockByNumber']);
  });

  it("svc's own internal calls are never answered statically", async () => {
    h.calls.length = 0;
    const { ctx, done } = h.proxy.internalContext(h.net, 'eth_getBlockByNumber', ['0x0', false], 5000);
    try {
      const r = await h.proxy.runCall(ctx);
      expect(r.result).to.deep.equal({ number: '0x0', hash: '0xfromupstream' });
    } finally {
      done();
    }
    expect(h.calls.map((c) => c.method)).to.deep.equal(['eth_getBlockByNumber']);
  });
});

import { expect } from 'chai';
import type { HttpRequestInfo } from '../../../core/context.ts';
import { MatcherCache } from '../../../lib/matcher.ts';
import { DIRECTIVES, isAllowed, parseDirectiveBool, parseForceTrace, readHttpDirectives, resolveDirectives } from '../../../plugins/directives/index.ts';

function http(headers: Record<string, string>, query: Record<string, string> = {}): HttpRequestInfo {
  return { headers, query, remoteAddress: '127.0.0.1', clientAddress: '127.0.0.1', host: 'localhost', path: '/' };
}
const cache = new MatcherCache();

describe('directives plugin (spec §2.8)', () => {
  it('has the ten directives of the table, with their header and query names', () => {
    expect(DIRECTIVES.map((d) => d.query)).to.deep.equal([
      'retry-empty', 'retry-pending', 'skip-cache-read', 'use-upstream', 'skip-interpolation', 'skip-consensus',
      'enforce-highest-block', 'enforce-getlogs-range', 'enforce-non-null-tagged-blocks', 'integrity',
    ]);
    expect(DIRECTIVES.every((d) => d.header === `x-svc-${d.query}`)).to.equal(true);
  });

  it('booleans: only `true` (any case, whitespace stripped) is truthy; 1 and yes are false', () => {
    expect(parseDirectiveBool('true')).to.equal(true);
    expect(parseDirectiveBool(' TRUE ')).to.equal(true);
    expect(parseDirectiveBool('1')).to.equal(false);
    expect(parseDirectiveBool('yes')).to.equal(false);
    expect(parseDirectiveBool('false')).to.equal(false);
  });

  it('force-trace accepts true, 1 and yes', () => {
    for (const v of ['true', '1', 'yes', 'YES']) expect(parseForceTrace(v)).to.equal(true);
    expect(parseForceTrace('no')).to.equal(false);
    expect(parseForceTrace(undefined)).to.equal(false);
  });

  it('precedence: directiveDefaults < header < query', () => {
    const d = resolveDirectives({ retryEmpty: false, useUpstream: 'cfg' }, readHttpDirectives(http({ 'x-svc-retry-empty': 'true', 'x-svc-use-upstream': 'hdr' }, { 'use-upstream': 'qry' })), undefined, cache);
    expect(d.retryEmpty).to.equal(true);
    expect(d.useUpstream).to.equal('qry');
  });

  it('a header value is not trimmed; a query value is', () => {
    const h = resolveDirectives({}, readHttpDirectives(http({ 'x-svc-use-upstream': ' a ' })), undefined, cache);
    expect(h.useUpstream).to.equal(' a ');
    const q = resolveDirectives({}, readHttpDirectives(http({}, { 'skip-cache-read': ' mem* ' })), undefined, cache);
    expect(q.skipCacheRead).to.equal('mem*');
  });

  it('explicit false from a request overrides a config default of true (tri-state)', () => {
    const d = resolveDirectives({ skipConsensus: true }, readHttpDirectives(http({ 'x-svc-skip-consensus': 'false' })), undefined, cache);
    expect(d.skipConsensus).to.equal(false);
  });

  it('unset config booleans stay unset', () => {
    const d = resolveDirectives({}, readHttpDirectives(http({})), undefined, cache);
    expect(d).to.deep.equal({});
  });

  it('enforce-getlogs-range from a request is ignored; only config sets it (§2.8 #8)', () => {
    const d = resolveDirectives({ enforceGetLogsBlockRange: true }, readHttpDirectives(http({ 'x-svc-enforce-getlogs-range': 'false' }, { 'enforce-getlogs-range': 'false' })), undefined, cache);
    expect(d.enforceGetLogsBlockRange).to.equal(true);
  });

  it('§2.8 allowClientDirectives — unset = all, "" = none, "*" = all, matcher = all but excluded', () => {
    expect(isAllowed(undefined, 'use-upstream', cache)).to.equal(true);
    expect(isAllowed('', 'use-upstream', cache)).to.equal(false);
    expect(isAllowed('*', 'use-upstream', cache)).to.equal(true);
    expect(isAllowed('!skip-cache-read & !use-upstream', 'use-upstream', cache)).to.equal(false);
    expect(isAllowed('!skip-cache-read & !use-upstream', 'retry-empty', cache)).to.equal(true);
  });

  it('§2.8 (a) — filters only HTTP-supplied directives: directiveDefaults always apply', () => {
    const d = resolveDirectives({ useUpstream: 'cfg' }, readHttpDirectives(http({}, { 'use-upstream': 'client', 'retry-empty': 'true' })), '!use-upstream', cache);
    expect(d.useUpstream).to.equal('cfg');
    expect(d.retryEmpty).to.equal(true);
  });

  it('§2.8 (b) — force-trace is never filtered', () => {
    const d = resolveDirectives({}, readHttpDirectives(http({ 'x-svc-force-trace': '1' })), '', cache);
    expect(d.forceTrace).to.equal(true);
  });
});

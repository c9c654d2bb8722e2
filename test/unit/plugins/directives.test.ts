/**
 * The directives plugin (spec §2.8): it knows no directive itself; the plugins of the default
 * preset declare the ten of the table (and `force-trace`), each the ones it honours. Parsing,
 * precedence (config < header < query), `allowClientDirectives` and the declaration rules.
 */
import { expect } from 'chai';
import type { HttpRequestInfo } from '../../../core/pipeline/context.ts';
import { createLogger } from '../../../lib/logger.ts';
import { createProxy } from '../../../core/host/create.ts';
import type { Plugin } from '../../../core/plugin-api.ts';
import type { DirectiveDeclaration } from 'svc-proxy/plugins/directives';
import { PluginContractError } from '../../../core/plugin-errors.ts';
import { DIRECTIVES_SERVICE } from 'svc-proxy/plugins/directives';
import { MatcherCache } from '../../../lib/matcher.ts';
import {
  declareDirective,
  type DirectiveSpec,
  isAllowed,
  parseDirectiveBool,
  parseDirectiveFlag,
  readHttpDirectives,
  resolveDirectives,
} from '../../../plugins/directives/index.ts';
import { defaultPreset } from '../../../presets/default.ts';

function http(headers: Record<string, string>, query: Record<string, string> = {}): HttpRequestInfo {
  return { headers, query, remoteAddress: '127.0.0.1', clientAddress: '127.0.0.1', host: 'localhost', path: '/' };
}
const cache = new MatcherCache();

/** Every directive the default preset's plugins declare, by declaring plugin (a recording directives service in place of the plugin). */
function declaredByDefaultPreset(): { plugin: string; d: DirectiveDeclaration }[] {
  const seen: { plugin: string; d: DirectiveDeclaration }[] = [];
  let current = '';
  const recorder: Plugin = {
    name: 'directives',
    apply: (h) => h.services.provide(DIRECTIVES_SERVICE, { declare: (d) => void seen.push({ plugin: current, d }) }),
  };
  const plugins = [recorder, ...defaultPreset().filter((p) => p.name !== 'directives')].map(
    (p): Plugin => ({ ...p, apply: (h) => ((current = p.name), p.apply(h)) }),
  );
  createProxy({ config: {}, plugins, logger: createLogger('silent') });
  return seen;
}

/** The specs as the default preset declares them (what the plugin parses). */
function defaultSpecs(): DirectiveSpec[] {
  const specs: DirectiveSpec[] = [];
  for (const { d } of declaredByDefaultPreset()) declareDirective(specs, d);
  return specs;
}

describe('directives plugin (spec §2.8)', () => {
  let specs: DirectiveSpec[];
  before(() => {
    specs = defaultSpecs();
  });

  it('the ten directives of the table (and force-trace) are declared by the plugins that honour them, with their header and query names', () => {
    const declared = declaredByDefaultPreset();
    expect(declared.map(({ plugin, d }) => `${d.query}:${plugin}`).sort()).to.deep.equal(
      [
        'retry-empty:evm-retries',
        'retry-pending:evm-retries',
        'skip-cache-read:cache',
        'skip-cache-read:evm-methods',
        'skip-cache-read:integrity',
        // evm-state: a `safe`-tagged call under evm.safeBlockSource goes to its source and never reads the cache.
        'skip-cache-read:evm-state',
        'use-upstream:evm-state',
        'use-upstream:select',
        'skip-interpolation:evm-interpolation',
        'skip-consensus:consensus',
        'enforce-highest-block:evm-state',
        'enforce-getlogs-range:evm-getlogs',
        'enforce-non-null-tagged-blocks:evm-state',
        'integrity:integrity',
        'force-trace:tracing',
      ].sort(),
    );
    expect(declared.every(({ d }) => d.header.toLowerCase() === `x-svc-${d.query}`)).to.equal(true);
    expect(defaultSpecs()).to.have.length(11);
  });

  it('a second plugin may declare a directive again identically; a different declaration of a name, or a malformed one, is refused', () => {
    const specs: DirectiveSpec[] = [];
    const d: DirectiveDeclaration = { query: 'skip-cache-read', header: 'X-SVC-Skip-Cache-Read', field: 'skipCacheRead', type: 'string' };
    declareDirective(specs, d);
    declareDirective(specs, { ...d, header: 'x-svc-skip-cache-read', fromRequest: true, filtered: true });
    expect(specs).to.have.length(1);
    expect(() => declareDirective(specs, { ...d, type: 'bool' })).to.throw(PluginContractError, /collides with a declared one: skip-cache-read/);
    expect(() => declareDirective(specs, { ...d, query: 'other' })).to.throw(PluginContractError, /collides/);
    expect(() => declareDirective(specs, { ...d, query: 'x', header: 'x-x', field: 'f', type: 'number' as never })).to.throw(
      PluginContractError,
      /type bool, flag or string/,
    );
    // Each name alone collides: the query, the header, the field.
    expect(() => declareDirective(specs, { ...d, header: 'x-other', field: 'other' })).to.throw(PluginContractError, /collides/);
    expect(() => declareDirective(specs, { ...d, header: 'x-other' })).to.throw(PluginContractError, /collides/);
    expect(() => declareDirective(specs, { ...d, field: 'other' })).to.throw(PluginContractError, /collides/);
    expect(() => declareDirective(specs, { ...d, query: 'other', header: 'x-other' })).to.throw(PluginContractError, /collides/);
    // The header starts with x-: a name merely ending in x-... is malformed.
    expect(() => declareDirective([], { ...d, header: 'bad-x-skip' })).to.throw(PluginContractError, /header x-\[a-z0-9-\]\+/);
    expect(specs).to.have.length(1);
  });

  it('§2.8 ¶4 — booleans: only `true` (any case, whitespace stripped) is truthy; 1 and yes are false', () => {
    expect(parseDirectiveBool('true')).to.equal(true);
    expect(parseDirectiveBool(' TRUE ')).to.equal(true);
    expect(parseDirectiveBool('1')).to.equal(false);
    expect(parseDirectiveBool('yes')).to.equal(false);
    expect(parseDirectiveBool('false')).to.equal(false);
  });

  it('§2.8 ¶5 — force-trace (a flag) accepts true, 1 and yes', () => {
    for (const v of ['true', '1', 'yes', 'YES']) expect(parseDirectiveFlag(v)).to.equal(true);
    expect(parseDirectiveFlag('no')).to.equal(false);
    expect(parseDirectiveFlag(undefined)).to.equal(false);
    expect(resolveDirectives({}, readHttpDirectives(http({ 'x-svc-force-trace': 'yes' }), defaultSpecs()), undefined, cache).forceTrace).to.equal(true);
  });

  it('§2.8 ¶1 — precedence: directiveDefaults < header < query', () => {
    const d = resolveDirectives(
      { retryEmpty: false, useUpstream: 'cfg' },
      readHttpDirectives(http({ 'x-svc-retry-empty': 'true', 'x-svc-use-upstream': 'hdr' }, { 'use-upstream': 'qry' }), specs),
      undefined,
      cache,
    );
    expect(d.retryEmpty).to.equal(true);
    expect(d.useUpstream).to.equal('qry');
  });

  it('a header value is not trimmed; a query value is', () => {
    const h = resolveDirectives({}, readHttpDirectives(http({ 'x-svc-use-upstream': ' a ' }), specs), undefined, cache);
    expect(h.useUpstream).to.equal(' a ');
    const q = resolveDirectives({}, readHttpDirectives(http({}, { 'skip-cache-read': ' mem* ' }), specs), undefined, cache);
    expect(q.skipCacheRead).to.equal('mem*');
  });

  it('§2.8 ¶3 — explicit false from a request overrides a config default of true (tri-state)', () => {
    const d = resolveDirectives({ skipConsensus: true }, readHttpDirectives(http({ 'x-svc-skip-consensus': 'false' }), specs), undefined, cache);
    expect(d.skipConsensus).to.equal(false);
  });

  it('§2.8 ¶3 — unset config booleans stay unset', () => {
    const d = resolveDirectives({}, readHttpDirectives(http({}), specs), undefined, cache);
    expect(d).to.deep.equal({});
  });

  it('enforce-getlogs-range from a request is ignored; only config sets it (§2.8 #8)', () => {
    const d = resolveDirectives(
      { enforceGetLogsBlockRange: true },
      readHttpDirectives(http({ 'x-svc-enforce-getlogs-range': 'false' }, { 'enforce-getlogs-range': 'false' }), specs),
      undefined,
      cache,
    );
    expect(d.enforceGetLogsBlockRange).to.equal(true);
  });

  it('§2.8 allowClientDirectives — unset = all, "" = none, "*" = all, matcher = all but excluded', () => {
    expect(isAllowed(undefined, 'use-upstream', cache)).to.equal(true);
    expect(isAllowed('', 'use-upstream', cache)).to.equal(false);
    expect(isAllowed('*', 'use-upstream', cache)).to.equal(true);
    // Surrounding whitespace is not part of the expression.
    expect(isAllowed('  ', 'use-upstream', cache)).to.equal(false);
    expect(isAllowed(' * ', 'use-upstream', cache)).to.equal(true);
    expect(isAllowed(' use-upstream ', 'use-upstream', cache)).to.equal(true);
    expect(isAllowed('!skip-cache-read & !use-upstream', 'use-upstream', cache)).to.equal(false);
    expect(isAllowed('!skip-cache-read & !use-upstream', 'retry-empty', cache)).to.equal(true);
  });

  it('§2.8 (a) — filters only HTTP-supplied directives: directiveDefaults always apply', () => {
    const d = resolveDirectives(
      { useUpstream: 'cfg' },
      readHttpDirectives(http({}, { 'use-upstream': 'client', 'retry-empty': 'true' }), specs),
      '!use-upstream',
      cache,
    );
    expect(d.useUpstream).to.equal('cfg');
    expect(d.retryEmpty).to.equal(true);
  });

  it('§2.8 (b) — force-trace is never filtered', () => {
    const d = resolveDirectives({}, readHttpDirectives(http({ 'x-svc-force-trace': '1' }), specs), '', cache);
    expect(d.forceTrace).to.equal(true);
  });
});

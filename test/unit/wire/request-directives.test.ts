/**
 * Request directives (spec §2.8): boolean and flag parsing with every blank, repeated headers,
 * `allowClientDirectives` with blanks around `*` and around the empty value, which level's
 * `allowClientDirectives` applies (rule c: the strategy's grant, else the network's, else the
 * project's), the bounds of a declaration, and one reading of the HTTP part per request.
 */
import { expect } from 'chai';
import { SyncWaterfallHook } from 'tapable';
import type { CallContext, Directives, HttpRequestInfo } from '../../../core/pipeline/context.ts';
import type { PluginHost } from '../../../core/plugin-api.ts';
import type { DirectiveDeclaration } from 'svc-proxy/plugins/directives';
import { DIRECTIVES_SERVICE, type DirectivesService } from 'svc-proxy/plugins/directives';
import { PluginContractError } from '../../../core/plugin-errors.ts';
import { MatcherCache } from '../../../lib/matcher.ts';
import {
  declareDirective,
  directivesPlugin,
  type DirectiveSpec,
  isAllowed,
  parseDirectiveBool,
  parseDirectiveFlag,
  readHttpDirectives,
} from '../../../plugins/directives/index.ts';

function http(headers: Record<string, string | string[]>, query: Record<string, string> = {}): HttpRequestInfo {
  return { headers, query, remoteAddress: '127.0.0.1', clientAddress: '127.0.0.1', host: 'localhost', path: '/' } as HttpRequestInfo;
}

const USE_UPSTREAM: DirectiveDeclaration = { query: 'use-upstream', header: 'X-SVC-Use-Upstream', field: 'useUpstream', type: 'string' };
const RETRY_EMPTY: DirectiveDeclaration = { query: 'retry-empty', header: 'X-SVC-Retry-Empty', field: 'retryEmpty', type: 'bool' };
const FORCE_TRACE: DirectiveDeclaration = { query: 'force-trace', header: 'X-SVC-Force-Trace', field: 'forceTrace', type: 'flag', filtered: false };

describe('wire: request directives (spec §2.8)', () => {
  describe('parsing', () => {
    it('booleans: only "true" after every blank is stripped, any case', () => {
      for (const v of ['true', 'TRUE', '\ttrue\n', ' t r u e ', 'True\r']) expect(parseDirectiveBool(v), JSON.stringify(v)).to.equal(true);
      for (const v of ['', '1', 'yes', 'truee', 'tru']) expect(parseDirectiveBool(v), JSON.stringify(v)).to.equal(false);
    });

    it('flags: true, 1 and yes, trimmed, any case', () => {
      for (const v of [' true ', '1', '\tYes\n']) expect(parseDirectiveFlag(v), JSON.stringify(v)).to.equal(true);
      for (const v of ['', '0', 'on', 'y e s']) expect(parseDirectiveFlag(v), JSON.stringify(v)).to.equal(false);
    });

    it('a repeated header: its first value is read', () => {
      const specs: DirectiveSpec[] = [];
      declareDirective(specs, USE_UPSTREAM);
      expect(readHttpDirectives(http({ 'x-svc-use-upstream': ['a', 'b'] }), specs).values.map((v) => v.value)).to.deep.equal(['a']);
    });

    it('a header typed bool or flag is parsed, a string header is kept as sent; absent directives are not read', () => {
      const specs: DirectiveSpec[] = [];
      for (const d of [USE_UPSTREAM, RETRY_EMPTY, FORCE_TRACE]) declareDirective(specs, d);
      const read = readHttpDirectives(http({ 'x-svc-retry-empty': 'TRUE', 'x-svc-force-trace': '1' }), specs);
      expect(read.values.map((v) => [v.spec.field, v.value])).to.deep.equal([
        ['retryEmpty', true],
        ['forceTrace', true],
      ]);
      const q = readHttpDirectives(http({ 'x-svc-retry-empty': 'true' }, { 'retry-empty': 'no', 'use-upstream': ' b ' }), specs);
      expect(q.values.map((v) => [v.spec.field, v.value])).to.deep.equal([
        ['useUpstream', 'b'],
        ['retryEmpty', false],
      ]);
    });
  });

  describe('allowClientDirectives', () => {
    const cache = new MatcherCache();
    it('blanks around the value: "  " is none, " * " is all', () => {
      expect(isAllowed('  ', 'use-upstream', cache)).to.equal(false);
      expect(isAllowed(' * ', 'use-upstream', cache)).to.equal(true);
      expect(isAllowed(' use-upstream ', 'use-upstream', cache)).to.equal(true);
      expect(isAllowed(' use-upstream ', 'retry-empty', cache)).to.equal(false);
    });
  });

  describe('declarations', () => {
    const base: DirectiveDeclaration = { query: 'q', header: 'x-q', field: 'f', type: 'string' };
    it('the longest names accepted: query 64, header x- plus 64, field 64 characters', () => {
      const specs: DirectiveSpec[] = [];
      declareDirective(specs, { query: `a${'b'.repeat(63)}`, header: `x-${'c'.repeat(64)}`, field: `F${'g'.repeat(63)}`, type: 'flag' });
      expect(specs).to.have.length(1);
      expect(specs[0]).to.deep.equal({
        query: `a${'b'.repeat(63)}`,
        header: `x-${'c'.repeat(64)}`,
        field: `F${'g'.repeat(63)}`,
        type: 'flag',
        fromRequest: true,
        filtered: true,
      });
    });

    const refused: [string, Partial<DirectiveDeclaration>][] = [
      ['a query of 65 characters', { query: `a${'b'.repeat(64)}` }],
      ['a query starting with a digit', { query: '1q' }],
      ['a query with an upper-case letter', { query: 'qQ' }],
      ['a query with a trailing line break', { query: 'q\n' }],
      ['a header without x-', { header: 'y-q' }],
      ['a header of x- alone', { header: 'x-' }],
      ['a header of x- plus 65 characters', { header: `x-${'c'.repeat(65)}` }],
      ['a header with a space', { header: 'x-a b' }],
      ['a field of 65 characters', { field: `F${'g'.repeat(64)}` }],
      ['a field with a dash', { field: 'f-g' }],
      ['a field starting with a digit', { field: '1f' }],
    ];
    for (const [name, change] of refused) {
      it(`refused: ${name}`, () => {
        const specs: DirectiveSpec[] = [];
        expect(() => declareDirective(specs, { ...base, ...change })).to.throw(
          PluginContractError,
          /query must match \[a-z\]\[a-z0-9-\]\*, header x-\[a-z0-9-\]\+, field an identifier, type bool, flag or string/,
        );
        expect(specs).to.deep.equal([]);
      });
    }

    it('the header is matched case-insensitively; fromRequest and filtered default to true and count for sameness', () => {
      const specs: DirectiveSpec[] = [];
      declareDirective(specs, { ...base, header: 'X-Q' });
      declareDirective(specs, { ...base, header: 'x-q', fromRequest: true, filtered: true });
      expect(specs).to.have.length(1);
      expect(() => declareDirective(specs, { ...base, fromRequest: false })).to.throw(
        PluginContractError,
        'directive q (x-q, field f) collides with a declared one: q (x-q, field f, string)',
      );
      expect(() => declareDirective(specs, { ...base, filtered: false })).to.throw(PluginContractError, /collides/);
      expect(() => declareDirective(specs, { ...base, query: 'other', header: 'x-other' })).to.throw(PluginContractError, /collides/);
      expect(() => declareDirective(specs, { ...base, query: 'other', field: 'g' })).to.throw(PluginContractError, /collides/);
      declareDirective(specs, { query: 'r', header: 'x-r', field: 'g', type: 'bool' });
      expect(specs.map((s) => s.query)).to.deep.equal(['q', 'r']);
    });
  });

  describe('the plugin', () => {
    function setUp(): { hook: SyncWaterfallHook<[Directives, CallContext]>; service: DirectivesService } {
      const hook = new SyncWaterfallHook<[Directives, CallContext]>(['directives', 'ctx']);
      let service: DirectivesService | undefined;
      const host = {
        hooks: { directives: hook },
        services: { provide: (key: unknown, impl: DirectivesService) => key === DIRECTIVES_SERVICE && (service = impl) },
      } as unknown as PluginHost;
      const p = directivesPlugin();
      expect(p.name).to.equal('directives');
      p.apply(host);
      return { hook, service: service as DirectivesService };
    }

    function ctx(h: HttpRequestInfo, allow: { identity?: string; network?: string; project?: string }, defaults: Directives = {}): CallContext {
      return {
        http: h,
        identity: allow.identity === undefined ? undefined : { userId: 'u', allowClientDirectives: allow.identity },
        network: { config: { allowClientDirectives: allow.network, directiveDefaults: defaults } },
        project: { config: { allowClientDirectives: allow.project } },
      } as unknown as CallContext;
    }

    it("rule c: the strategy's grant, else the network's value, else the project's", () => {
      const { hook, service } = setUp();
      service.declare(USE_UPSTREAM);
      const h = () => http({ 'x-svc-use-upstream': 'a' });
      expect(hook.call({}, ctx(h(), { identity: '*', network: '', project: '' })).useUpstream).to.equal('a');
      expect(hook.call({}, ctx(h(), { identity: '', network: '*', project: '*' })).useUpstream).to.equal(undefined);
      expect(hook.call({}, ctx(h(), { network: '*', project: '' })).useUpstream).to.equal('a');
      expect(hook.call({}, ctx(h(), { network: '', project: '*' })).useUpstream).to.equal(undefined);
      expect(hook.call({}, ctx(h(), { project: '' })).useUpstream).to.equal(undefined);
      expect(hook.call({}, ctx(h(), {})).useUpstream).to.equal('a');
    });

    it('the network directiveDefaults are the base; the HTTP part is read once per request', () => {
      const { hook, service } = setUp();
      service.declare(USE_UPSTREAM);
      service.declare(RETRY_EMPTY);
      const req = http({ 'x-svc-use-upstream': 'a' });
      expect(hook.call({}, ctx(req, {}, { retryEmpty: true }))).to.deep.equal({ retryEmpty: true, useUpstream: 'a' });
      // The same request object again (a batch's next call): its first reading stands.
      req.headers['x-svc-use-upstream'] = 'changed';
      expect(hook.call({}, ctx(req, {})).useUpstream).to.equal('a');
      expect(hook.call({}, ctx(http({ 'x-svc-use-upstream': 'b' }), {})).useUpstream).to.equal('b');
    });
  });
});

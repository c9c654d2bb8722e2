/**
 * The user docs (README.md and every docs/*.md) say only what svc does:
 * - every ```yaml block is a whole svc config that passes `svc validate` (its `preset` or the
 *   default one; `${VAR}`s set), and every ```ts block calling `defineConfig(` loads through
 *   `readConfigFile` and validates the same way;
 * - every metric (`svc_...`), header (`X-SVC-...`) and error (`Err...`) name a page mentions is
 *   defined by the source (test/helpers/source-names.ts);
 * - every relative link reaches a file, and its `#anchor` a heading of the target page;
 * - README.md stays a front page (at most 300 lines) that links to every docs page, and every
 *   topic page has a `## Coming from eRPC` section.
 * docs/interface.md (the spec, verbatim) and docs/conformance.md (generated from test titles)
 * are only link-checked.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { readConfigFile } from '../../config/load.ts';
import type { SvcConfigInput } from '../../config/types.ts';
import { createLogger } from '../../lib/logger.ts';
import { createProxy } from '../../core/host/create.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { loadPreset } from '../../presets/index.ts';
import {
  brokenLinks,
  codeBlocks,
  docsPageOf,
  docsPagePaths,
  headings,
  lineOf,
  linkTargets,
  mentions,
  readDocsPage,
  type DocsPage,
} from '../helpers/docs-pages.ts';
import { isKnownError, isKnownHeader, isKnownMetric, sourceNames } from '../helpers/source-names.ts';

/** Pages checked for links only: the spec copied verbatim, and the generated conformance map. */
const LINKS_ONLY = new Set(['docs/interface.md', 'docs/conformance.md']);
/** Pages that are not about one topic (or are wholly about eRPC), so need no "Coming from eRPC" section. */
const NOT_TOPICS = new Set([
  'README.md',
  'docs/interface.md',
  'docs/conformance.md',
  'docs/production.md',
  'docs/development.md',
  'docs/mutation.md',
  'docs/benchmarks.md',
  'docs/migrating-from-erpc.md',
]);
/** Longest README.md, in lines: a front page, the content lives in docs/. */
const README_MAX_LINES = 300;

/** Values for the `${VAR}`s of the examples: typed where the key needs it, a placeholder otherwise. */
const TYPED_ENV: Record<string, string> = { PORT: '4000' };
const ENV_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** The environment an example's user would have: every `${VAR}` it uses set. */
function envFor(text: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const m of text.matchAll(ENV_REF)) env[m[1]!] = TYPED_ENV[m[1]!] ?? `example-${m[1]!.toLowerCase()}`;
  return env;
}

/**
 * What `svc validate` does with a raw config (bin/commands.ts `validate()`), in-process: the
 * config's `preset` (else `default`), then createProxy with that preset's plugins.
 * @throws ConfigError or PluginContractError as `svc validate` would report them
 */
async function validate(raw: unknown, env: NodeJS.ProcessEnv): Promise<void> {
  const cfg = (raw ?? {}) as SvcConfigInput;
  const preset = await loadPreset(cfg.preset ?? 'default');
  const proxy = createProxy({ config: cfg, plugins: preset(), logger: createLogger('silent'), env });
  await proxy.close();
}

const pages: DocsPage[] = docsPagePaths().map(readDocsPage);
const named = pages.filter((p) => !LINKS_ONLY.has(p.path));

describe('docs pages', () => {
  describe('config examples pass `svc validate`', () => {
    it("an unknown key fails, and a config's `preset` picks the plugins it is checked against (sanity check of the test itself)", async () => {
      const fails = (text: string) =>
        validate(parseYaml(text), envFor(text)).then(
          () => expect.fail(`accepted:\n${text}`),
          (e: Error) => e.message,
        );
      expect(await fails('server:\n  httpPort: 4000\n  nope: 1\n')).to.include('nope');
      await validate(parseYaml('database:\n  evmJsonRpcCache: {}\n'), {});
      expect(await fails('preset: minimal\ndatabase:\n  evmJsonRpcCache: {}\n')).to.include('database');
      expect(envFor('a: ${PORT}\nb: ${PROVIDER_A_KEY}')).to.deep.equal({ PORT: '4000', PROVIDER_A_KEY: 'example-provider_a_key' });
    });
    for (const page of named) {
      codeBlocks(page, ['yaml', 'yml']).forEach((block, i) => {
        const where = `${page.path} yaml block #${i + 1} (line ${lineOf(page, block.raw)})`;
        it(where, async () => {
          let raw: unknown;
          try {
            raw = parseYaml(block.text) ?? {};
          } catch (e) {
            expect.fail(`${where} is not YAML (non-config YAML is written as \`\`\`text): ${(e as Error).message}`);
          }
          await validate(raw, envFor(block.text)).catch((e: Error) => expect.fail(`${where} is not a valid svc config: ${e.message}`));
        });
      });
      codeBlocks(page, ['ts', 'typescript'])
        .filter((b) => b.text.includes('defineConfig('))
        .forEach((block, i) => {
          const where = `${page.path} TypeScript config #${i + 1} (line ${lineOf(page, block.raw)})`;
          it(where, async () => {
            // Examples import from 'svc-proxy/config' (the package's own name, compiled in dist/), so the
            // file lives in the package root; one name per block, since ESM caches a module by URL.
            const file = join(PACKAGE_ROOT, `.docs-example-${process.pid}-${page.path.replace(/[^A-Za-z0-9]/g, '-')}-${i}.ts`);
            writeFileSync(file, block.text);
            try {
              const raw = await readConfigFile(file);
              await validate(raw, envFor(block.text)).catch((e: Error) => expect.fail(`${where} is not a valid svc config: ${e.message}`));
            } finally {
              rmSync(file, { force: true });
            }
          });
        });
    }
  });

  describe('names mentioned exist in the source', () => {
    const src = sourceNames();
    const METRIC = /\bsvc_[a-z0-9_]+(?![A-Za-z0-9])/g;
    const HEADER = /\bX-SVC-[A-Za-z0-9-]+/gi;
    const ERROR = /\bErr[A-Z][A-Za-z]+/g;
    /** One message per name of `page` matching `re` that `known` rejects. */
    const unknown = (page: DocsPage, re: RegExp, known: (name: string) => boolean, what: string): string[] =>
      [...mentions(page, re)].filter((n) => !known(n)).map((n) => `${page.path} line ${lineOf(page, n, true)}: ${what.replace('NAME', n)}`);
    const unknownMetrics = (page: DocsPage) =>
      unknown(page, METRIC, (n) => isKnownMetric(src, n), 'metric NAME is not registered in core/, plugins/ or presets/');
    const unknownHeaders = (page: DocsPage) => unknown(page, HEADER, (n) => isKnownHeader(src, n), 'header NAME is not in core/, plugins/ or presets/');
    const unknownErrors = (page: DocsPage) =>
      unknown(page, ERROR, (n) => isKnownError(src, n), 'error NAME is neither in ERROR_TABLE nor an error class or name of the source');

    it('the checks find names in prose, code spans, tables and code blocks, and accept only defined ones (sanity check of the test itself)', () => {
      expect(src.histograms).to.include('svc_upstream_request_duration_seconds');
      expect(src.headerSuffixes).to.include('-truncated');
      const page = docsPageOf(
        'docs/x.md',
        [
          'Counts `svc_upstream_request_total{project}` and svc_made_up_total; `svc_upstream_request_duration_seconds_bucket`, `svc_storage_breaker_*`,',
          'the admin method `svc_listApiKeys`, `svc_rl:` keys.',
          '',
          '| header | error |',
          '|---|---|',
          '| `X-SVC-Cache`, `x-svc-use-upstream`, `X-SVC-Methods-Truncated`, `X-SVC-Consensus-*` | `ErrUpstreamsExhausted`, `<ErrName>` |',
          '| `X-SVC-Made-Up` | ErrMadeUp |',
          '',
          '```text',
          'svc_upstream_request_total_bucket 1',
          '```',
        ].join('\n'),
      );
      expect(unknownMetrics(page)).to.deep.equal([
        'docs/x.md line 1: metric svc_made_up_total is not registered in core/, plugins/ or presets/',
        'docs/x.md line 10: metric svc_upstream_request_total_bucket is not registered in core/, plugins/ or presets/',
      ]);
      expect(unknownHeaders(page)).to.deep.equal(['docs/x.md line 7: header X-SVC-Made-Up is not in core/, plugins/ or presets/']);
      expect(unknownErrors(page)).to.deep.equal(['docs/x.md line 7: error ErrMadeUp is neither in ERROR_TABLE nor an error class or name of the source']);
    });

    for (const page of named) {
      it(`${page.path}: every svc_* metric name is registered in the source`, () => {
        expect(unknownMetrics(page)).to.deep.equal([]);
      });
      it(`${page.path}: every X-SVC-* header name exists in the source`, () => {
        expect(unknownHeaders(page)).to.deep.equal([]);
      });
      it(`${page.path}: every Err* error name is in the error table or the source`, () => {
        expect(unknownErrors(page)).to.deep.equal([]);
      });
    }
  });

  describe('relative links resolve', () => {
    it('a missing file, a missing anchor and an anchor into a non-page are found (sanity check of the test itself)', () => {
      const page = docsPageOf(
        'docs/x.md',
        [
          '# Title',
          '## Same',
          '## Same',
          'See [a](caching.md), [b](caching.md#coming-from-erpc), [c](#same-1), [d](https://example.com/#x), [e](../test/unit/docs.test.ts).',
          'Broken: [f](nope.md), [g](caching.md#nope), [h](#same-2), [i](../package.json#x).',
        ].join('\n'),
      );
      expect(brokenLinks(page)).to.deep.equal([
        'docs/x.md line 5: link nope.md: docs/nope.md does not exist',
        'docs/x.md line 5: link caching.md#nope: docs/caching.md has no heading with anchor #nope',
        'docs/x.md line 5: link #same-2: docs/x.md has no heading with anchor #same-2',
        'docs/x.md line 5: link ../package.json#x: an #anchor into package.json, which is not a markdown page',
      ]);
    });
    for (const page of pages) {
      it(`${page.path}: every relative link reaches a file, and its #anchor a heading there`, () => {
        expect(brokenLinks(page)).to.deep.equal([]);
      });
    }
  });

  describe('README.md is a front page and topic pages have their sections', () => {
    const readme = pages.find((p) => p.path === 'README.md')!;
    it(`README.md is at most ${README_MAX_LINES} lines`, () => {
      const lines = readme.text.replace(/\n$/, '').split('\n').length;
      expect(lines, `README.md has ${lines} lines; move content to a docs/ page`).to.be.at.most(README_MAX_LINES);
    });
    it('README.md links to every docs/*.md page', () => {
      const linked = new Set(linkTargets(readme).map((h) => posix.normalize(h.split('#')[0]!)));
      const missing = pages.filter((p) => p.path !== 'README.md' && !linked.has(p.path)).map((p) => `README.md does not link to ${p.path}`);
      expect(missing).to.deep.equal([]);
    });
    for (const page of pages.filter((p) => !NOT_TOPICS.has(p.path))) {
      it(`${page.path} has a "## Coming from eRPC" section`, () => {
        const has = headings(page).some((h) => h.depth === 2 && h.text.trim() === 'Coming from eRPC');
        expect(has, `${page.path} has no "## Coming from eRPC" heading`).to.equal(true);
      });
    }
  });
});

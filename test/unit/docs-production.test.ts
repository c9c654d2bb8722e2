/**
 * docs/production.md, the production checklist: it must not drift from the code. Every test file
 * it links exists and holds every test title quoted after the link; every other relative link
 * points at a file of the repository; every config key written in backticks on a `Setting:` line
 * is a key path of the config schema (the one `svc config schema` prints for the default preset,
 * written as the config reference of docs/configuration.md writes paths, e.g. `projects[].networks[].allowMethods`);
 * and every checklist item either links a proving test or says plainly that none proves it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { expect } from 'chai';
import { buildConfigSchema } from '../../config/schema.ts';
import { renderConfigReference } from '../../config/docs.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { defaultPreset } from '../../presets/default.ts';

const PAGE = join(PACKAGE_ROOT, 'docs', 'production.md');

/** Key paths of the default preset's config schema, as the config reference table names them. */
function schemaKeys(): Set<string> {
  const schema = buildConfigSchema(defaultPreset().flatMap((p) => (p.schema ? [p.schema] : [])));
  const keys = new Set<string>();
  for (const m of renderConfigReference(schema).matchAll(/^\| `([^`]+)` \|/gm)) keys.add(m[1]!);
  return keys;
}

/** A link to a test file and the titles quoted after it, up to the next link on the line. */
interface TestLink {
  file: string;
  titles: string[];
  line: string;
}

/** Every `[..](../test/...)` link of the page with the "titles" that follow it. */
function testLinks(page: string): TestLink[] {
  const out: TestLink[] = [];
  for (const line of page.split('\n')) {
    const links = [...line.matchAll(/\]\((\.\.\/test\/[^)\s#]+)\)/g)];
    links.forEach((m, i) => {
      const tail = line.slice(m.index! + m[0].length, i + 1 < links.length ? links[i + 1]!.index : undefined);
      const titles = [...tail.matchAll(/"([^"]+)"/g)].map((t) => t[1]!);
      out.push({ file: normalize(join(PACKAGE_ROOT, 'docs', m[1]!)), titles, line });
    });
  }
  return out;
}

describe('docs/production.md (production checklist)', () => {
  const page = readFileSync(PAGE, 'utf8');

  it('links at least one test per proof line, every linked test file exists and holds each quoted title', () => {
    const links = testLinks(page);
    expect(links.length).to.be.greaterThan(10);
    for (const l of links) {
      expect(existsSync(l.file), `missing test file ${l.file}`).to.equal(true);
      expect(l.titles, `no quoted test title after the link in: ${l.line}`).to.not.be.empty;
      const source = readFileSync(l.file, 'utf8');
      for (const t of l.titles) expect(source.includes(t), `"${t}" not found in ${l.file}`).to.equal(true);
    }
  });

  it('every other relative link points at a file of the repository', () => {
    for (const m of page.matchAll(/\]\(((?:\.\.\/|\.\/|[a-z])[^)\s#:]*)(#[^)]*)?\)/g)) {
      const target = normalize(join(dirname(PAGE), m[1]!));
      expect(existsSync(target), `broken link ${m[1]}`).to.equal(true);
    }
  });

  it('every backticked key on a Setting: line is a key path of the config schema', () => {
    const keys = schemaKeys();
    const settingLines = page.split('\n').filter((l) => l.includes('**Setting:**'));
    expect(settingLines.length).to.be.greaterThan(5);
    let named = 0;
    for (const line of settingLines) {
      for (const m of line.matchAll(/`([^`]+)`/g)) {
        named++;
        expect(keys.has(m[1]!), `\`${m[1]}\` is not a config key (see \`svc config schema\`)`).to.equal(true);
      }
    }
    expect(named).to.be.greaterThan(10);
  });

  it('each checklist item states its default and either links a proving test or says none proves it', () => {
    const items = page.split(/^## /m).slice(1);
    expect(items.length).to.be.greaterThanOrEqual(10);
    for (const item of items) {
      const title = item.split('\n')[0];
      expect(item, `${title}: no Setting: line`).to.include('**Setting:**');
      expect(item, `${title}: no Default: line`).to.include('**Default:**');
      const proved = /\*\*Proved by:\*\* \[test\//.test(item);
      const saysNone = /\b(No test proves|Not tested here)\b/.test(item);
      expect(proved || saysNone, `${title}: neither a proving test nor "No test proves"`).to.equal(true);
    }
  });

  it('covers the checklist topics: drain, forwarders, redaction, admin, memory, workers, cache tiers, storage stalls, node administration, alerts', () => {
    const headings = page
      .split('\n')
      .filter((l) => l.startsWith('## '))
      .join('\n')
      .toLowerCase();
    for (const topic of [
      'drain',
      'forwarders',
      'redaction',
      'admin exposure',
      'memory',
      'workers',
      'cache tiers',
      'storage that stalls',
      'node administration',
      'alert',
    ]) {
      expect(headings, topic).to.include(topic);
    }
  });
});

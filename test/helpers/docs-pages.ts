/**
 * The user docs as the docs test (test/unit/docs.test.ts) reads them: README.md and every
 * docs/*.md, tokenized with the `marked` lexer (no hand-written markdown parsing), with GitHub's
 * heading anchors computed by `github-slugger`.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import GithubSlugger from 'github-slugger';
import { marked, type Token, type Tokens } from 'marked';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';

/** One markdown page, read and tokenized. */
export interface DocsPage {
  /** Path relative to the package root, with `/` (`README.md`, `docs/caching.md`). */
  path: string;
  /** The whole text. */
  text: string;
  /** The marked tokens of the page. */
  tokens: Token[];
}

/** README.md then every docs/*.md, sorted by name. */
export function docsPagePaths(): string[] {
  const docs = readdirSync(join(PACKAGE_ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort();
  return ['README.md', ...docs.map((f) => `docs/${f}`)];
}

/**
 * Reads and tokenizes a page.
 * @param path relative to the package root
 */
export function readDocsPage(path: string): DocsPage {
  return docsPageOf(path, readFileSync(join(PACKAGE_ROOT, path), 'utf8'));
}

/**
 * Tokenizes a page's text (the test's own sanity checks build pages this way).
 * @param path where the page would live, relative to the package root
 */
export function docsPageOf(path: string, text: string): DocsPage {
  return { path, text, tokens: marked.lexer(text) };
}

/** Every token of a page, depth first (the marked walker: lists, tables and blockquotes included). */
function all(page: DocsPage): Token[] {
  const out: Token[] = [];
  marked.walkTokens(page.tokens, (t) => {
    out.push(t);
  });
  return out;
}

/**
 * The 1-based line of the first occurrence of `needle` in the page (0 when absent), for messages.
 * @param whole only an occurrence not followed by a name character (`svc_auth` is not found in `svc_auth_x`)
 */
export function lineOf(page: DocsPage, needle: string, whole = false): number {
  let i = page.text.indexOf(needle);
  while (whole && i >= 0 && /[A-Za-z0-9_-]/.test(page.text[i + needle.length] ?? '')) i = page.text.indexOf(needle, i + 1);
  return i < 0 ? 0 : page.text.slice(0, i).split('\n').length;
}

/**
 * The fenced code blocks of a page in one of the given languages (the info string's first word).
 * @param langs e.g. `['yaml', 'yml']`
 */
export function codeBlocks(page: DocsPage, langs: readonly string[]): Tokens.Code[] {
  return all(page).filter((t): t is Tokens.Code => t.type === 'code' && langs.includes(((t as Tokens.Code).lang ?? '').split(/\s/)[0]!));
}

/** The rendered text of inline tokens: text, code spans and link texts, without markup or HTML. */
function plain(tokens: readonly Token[]): string {
  let s = '';
  for (const t of tokens) {
    if (t.type === 'html') continue;
    const children = (t as { tokens?: Token[] }).tokens;
    if (children && children.length > 0) s += plain(children);
    else if ('text' in t && typeof t.text === 'string') s += t.text;
  }
  return s;
}

/** A heading with its rendered text. */
export interface Heading {
  depth: number;
  text: string;
}

/** The headings of a page, in order. */
export function headings(page: DocsPage): Heading[] {
  return all(page)
    .filter((t): t is Tokens.Heading => t.type === 'heading')
    .map((h) => ({ depth: h.depth, text: plain(h.tokens) }));
}

/**
 * The anchors GitHub gives the page's headings: github-slugger over each heading's rendered
 * text, one slugger for the page so a repeated heading gets `-1`, `-2`.
 */
export function headingAnchors(page: DocsPage): Set<string> {
  const slugger = new GithubSlugger();
  return new Set(headings(page).map((h) => slugger.slug(h.text)));
}

/** The targets of every link and image of a page (`[t](href)`, reference links resolved by marked). */
export function linkTargets(page: DocsPage): string[] {
  return all(page)
    .filter((t): t is Tokens.Link | Tokens.Image => t.type === 'link' || t.type === 'image')
    .map((t) => t.href);
}

/**
 * The texts a reader sees as words or code: leaf text tokens, code spans and code blocks (HTML,
 * such as the generated-section markers, left out).
 */
export function readableTexts(page: DocsPage): string[] {
  const out: string[] = [];
  for (const t of all(page)) {
    if (t.type === 'codespan' || t.type === 'code') out.push((t as Tokens.Codespan | Tokens.Code).text);
    else if (t.type === 'text' && !((t as Tokens.Text).tokens?.length ?? 0)) out.push((t as Tokens.Text).text);
  }
  return out;
}

/**
 * The distinct matches of a pattern in a page's readable texts, without placeholders: a match
 * written between `<` and `>` (`<ErrName>`) stands for any name.
 * @param re a global regular expression
 */
export function mentions(page: DocsPage, re: RegExp): Set<string> {
  const out = new Set<string>();
  for (const text of readableTexts(page)) {
    for (const m of text.matchAll(re)) {
      const at = m.index;
      if (text[at - 1] === '<' && text[at + m[0].length] === '>') continue;
      out.add(m[0]);
    }
  }
  return out;
}

const anchorCache = new Map<string, Set<string>>();

/** The heading anchors of a page of the package, read once per process. */
function anchorsOfFile(path: string): Set<string> {
  let a = anchorCache.get(path);
  if (!a) anchorCache.set(path, (a = headingAnchors(readDocsPage(path))));
  return a;
}

/**
 * The relative links of a page that lead nowhere, one message each (`<page> line N: link
 * <href>: <what is wrong>`): a target file that does not exist (relative to the page, inside
 * the package), or a `#anchor` that is no heading anchor of the target page (the page itself
 * for `#anchor` alone). Links with a scheme (`https:`, `mailto:`) are not checked.
 */
export function brokenLinks(page: DocsPage): string[] {
  const bad: string[] = [];
  for (const href of new Set(linkTargets(page))) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(href)) continue;
    const hash = href.indexOf('#');
    const file = decodeURIComponent(hash < 0 ? href : href.slice(0, hash));
    const anchor = hash < 0 ? undefined : decodeURIComponent(href.slice(hash + 1));
    const target = file === '' ? page.path : posix.normalize(posix.join(posix.dirname(page.path), file));
    const at = `${page.path} line ${lineOf(page, `(${href})`) || lineOf(page, href)}: link ${href}`;
    if (target.startsWith('..') || (file !== '' && !existsSync(join(PACKAGE_ROOT, target)))) {
      bad.push(`${at}: ${target} does not exist`);
    } else if (anchor !== undefined) {
      const anchors = file === '' ? headingAnchors(page) : target.endsWith('.md') ? anchorsOfFile(target) : undefined;
      if (!anchors) bad.push(`${at}: an #anchor into ${target}, which is not a markdown page`);
      else if (!anchors.has(anchor)) bad.push(`${at}: ${target} has no heading with anchor #${anchor}`);
    }
  }
  return bad;
}

/**
 * The rules of the interface document (docs/interface.md) as bin/gen-conformance.ts counts them:
 * list items, lettered rules, table rows and prose sentences, each with its id (the naming
 * convention is in bin/gen-conformance.ts's module comment). Split from the generator, which
 * re-exports it, so the extraction reads on its own.
 */

/** One rule of the interface document. */
export interface Rule {
  /** Rule id, e.g. `§4.2 #3`, `§2.8 (a)`, `§4.3 any:initializedUpstreams`. */
  id: string;
  /** Section number (`4.2`, `5`). */
  section: string;
  /** The rule's text (list item, lettered clause or the row's other cells), backticks kept. */
  text: string;
}

const stripTicks = (s: string): string => s.replace(/`/g, '').trim();

/** Splits a markdown table row on pipes that are not escaped (`\|`). */
function cells(line: string): string[] {
  const inner = line.trim().replace(/^\|/, '').replace(/\|$/, '');
  return inner.split(/(?<!\\)\|/).map((c) => c.replace(/\\\|/g, '|').trim());
}

/**
 * The sentences of one prose line: split after a full stop followed by a capital letter or a
 * backtick (`e.g. a pattern` stays whole); a label of at most three words ending with `:` that
 * introduces a table or list is no sentence.
 */
export function sentencesOf(line: string): string[] {
  return line
    .trim()
    .split(/(?<=\.)\s+(?=[A-Z`])/)
    .map((x) => x.trim())
    .filter((x) => x !== '' && !(x.endsWith(':') && x.split(/\s+/).length <= 3));
}

/**
 * Extracts every rule of the interface document, in document order.
 * @param markdown the document text
 * @throws Error when two rules get the same id (the convention would be ambiguous)
 */
export function extractRules(markdown: string): Rule[] {
  const rules: Rule[] = [];
  let section: string | undefined;
  /** Rows of the current section's tables, resolved at the end of the section. */
  let rows: { first: string; second: string; text: string; hash: boolean }[] = [];
  let tableHash = false;
  let inTable = false;
  /** Prose sentences counted so far, by section. */
  const prose = new Map<string, number>();
  const flushRows = () => {
    if (section === undefined) return;
    const count = new Map<string, number>();
    for (const r of rows) count.set(r.first, (count.get(r.first) ?? 0) + 1);
    for (const r of rows) {
      const base = r.hash ? `#${r.first}` : r.first;
      const id = (count.get(r.first) ?? 0) > 1 ? `§${section} ${base} / ${r.second}` : `§${section} ${base}`;
      rules.push({ id, section, text: r.text });
    }
    rows = [];
  };
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const heading = /^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s/.exec(line);
    if (heading) {
      flushRows();
      section = heading[1];
      inTable = false;
      continue;
    }
    if (/^#{1,6}\s/.test(line)) {
      flushRows();
      section = undefined;
      continue;
    }
    if (section === undefined) continue;
    if (line.trim().startsWith('|')) {
      if (!inTable) {
        // Header row; the next line is the separator.
        inTable = true;
        tableHash = stripTicks(cells(line)[0] ?? '') === '#';
        i++;
        continue;
      }
      const c = cells(line);
      rows.push({ first: stripTicks(c[0] ?? ''), second: stripTicks(c[1] ?? ''), text: c.slice(1).join(' · '), hash: tableHash });
      continue;
    }
    inTable = false;
    const item = /^(\d+)\.\s+(.*)$/.exec(line);
    if (item) {
      rules.push({ id: `§${section} #${item[1]}`, section, text: item[2] ?? '' });
      continue;
    }
    const sec = section;
    const letters = [...line.matchAll(/\(([a-z])\)\s/g)];
    if (letters.length === 0 && line.trim() !== '' && !line.startsWith('>')) {
      for (const sentence of sentencesOf(line)) {
        const n = (prose.get(sec) ?? 0) + 1;
        prose.set(sec, n);
        rules.push({ id: `§${sec} ¶${n}`, section: sec, text: sentence });
      }
      continue;
    }
    letters.forEach((m, k) => {
      const start = (m.index ?? 0) + m[0].length;
      const end = letters[k + 1]?.index ?? line.length;
      rules.push({ id: `§${sec} (${m[1]})`, section: sec, text: line.slice(start, end).replace(/[;\s]+$/, '') });
    });
  }
  flushRows();
  const seen = new Set<string>();
  for (const r of rules) {
    if (seen.has(r.id)) throw new Error(`interface.md: rule id ${r.id} occurs twice`);
    seen.add(r.id);
  }
  return rules;
}

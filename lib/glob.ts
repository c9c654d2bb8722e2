/**
 * Wildcard patterns matched in time linear in the subject. Method names,
 * Host headers and `use-upstream` selectors come from clients; a backtracking engine lets one
 * crafted string against a many-wildcard pattern freeze the event loop for minutes. Patterns
 * compile to RE2 (re2js), whose automaton never backtracks.
 *
 * Syntax (eRPC's): `*` matches any run of characters (`/`, `:` and `.` included), `?` exactly one
 * character; every other character is literal. A pattern of `*` alone matches everything.
 */
import { RE2JS } from 're2js';

/** A compiled pattern test. */
export type GlobTest = (subject: string) => boolean;

/** Longest pattern accepted from a client (`use-upstream`), characters. */
export const MAX_CLIENT_PATTERN_LENGTH = 256;

const ALWAYS: GlobTest = () => true;

/** RE2 source of one glob: literal runs quoted, `*` → `.*`, `?` → `.`. */
function sourceOf(glob: string): string {
  let out = '';
  let lit = '';
  for (const ch of glob) {
    if (ch === '*' || ch === '?') {
      if (lit) out += RE2JS.quote(lit);
      lit = '';
      // Collapse runs of `*`: `**` means the same as `*`.
      if (ch === '?') out += '.';
      else if (!out.endsWith('.*')) out += '.*';
    } else lit += ch;
  }
  if (lit) out += RE2JS.quote(lit);
  return out;
}

/**
 * Compiles one or more globs into a single test (any pattern matching = true).
 * @param globs patterns in the syntax above
 * @param opts `nocase` for case-insensitive matching (Host names)
 */
export function compileGlobs(globs: string | readonly string[], opts: { nocase?: boolean } = {}): GlobTest {
  const list = typeof globs === 'string' ? [globs] : globs;
  if (list.some((g) => /^\*+$/.test(g))) return ALWAYS;
  if (list.length === 0) return () => false;
  const wild = list.filter((g) => g.includes('*') || g.includes('?'));
  if (wild.length === 0 && !opts.nocase) {
    // Exact names only: a set lookup.
    const set = new Set(list);
    return (s) => set.has(s);
  }
  const re = RE2JS.compile(`^(?:${list.map(sourceOf).join('|')})$`, RE2JS.DOTALL | (opts.nocase ? RE2JS.CASE_INSENSITIVE : 0));
  return (s) => re.matches(s);
}

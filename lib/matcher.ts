/**
 * The one small matcher used for `allowClientDirectives` expressions and `use-upstream`
 * selectors (spec §2.8): terms joined by `&` (binds tighter) and `|`, each term an optional
 * leading `!` and a glob (lib/glob.ts: `*` matches any characters, `/` and `:` included, since
 * upstream ids contain URLs; `?` one character), matched in linear time. Expressions from
 * clients are bounded by {@link MAX_CLIENT_PATTERN_LENGTH}.
 */
import { compileGlobs, MAX_CLIENT_PATTERN_LENGTH, type GlobTest } from './glob.ts';

export { MAX_CLIENT_PATTERN_LENGTH };

/** A compiled matcher expression. */
export interface Matcher {
  /** The source expression. */
  readonly source: string;
  /** True when some term is negated. */
  readonly hasNegation: boolean;
  /**
   * Tests a subject. A positive term matches when the primary value or any alternate
   * matches; a negated term tests the primary value only (spec §2.8 #4: negations match ids only).
   * @param primary the main value (an upstream id, a directive name)
   * @param alternates other names of the subject (upstream tags `<key>:<value>`)
   */
  test(primary: string, alternates?: Iterable<string>): boolean;
}

interface Term {
  negated: boolean;
  match: GlobTest;
}

/**
 * Compiles an expression such as `!skip-cache-read & !use-upstream` or `tier:primary|local-*`.
 * Blank terms are ignored; an expression with no terms matches nothing.
 * @param expr the expression text
 */
export function compileMatcher(expr: string): Matcher {
  const groups: Term[][] = expr
    .split('|')
    .map((g) =>
      g
        .split('&')
        .map((t) => t.trim())
        .filter((t) => t.length > 0)
        .map((t) => {
          const negated = t.startsWith('!');
          const glob = negated ? t.slice(1).trim() : t;
          return { negated, match: compileGlobs(glob) };
        }),
    )
    .filter((g) => g.length > 0);
  const hasNegation = groups.some((g) => g.some((t) => t.negated));
  return {
    source: expr,
    hasNegation,
    test(primary, alternates) {
      const termOk = (t: Term): boolean => {
        if (t.negated) return !t.match(primary);
        if (t.match(primary)) return true;
        if (alternates) for (const a of alternates) if (t.match(a)) return true;
        return false;
      };
      return groups.some((g) => g.every(termOk));
    },
  };
}

/**
 * A bounded cache of compiled matchers: expressions come from clients, so the cache must not
 * grow without limit.
 */
export class MatcherCache {
  private readonly map = new Map<string, Matcher>();
  /** @param max most expressions kept; the oldest is dropped first */
  constructor(private readonly max = 256) {}
  /** The compiled matcher for an expression. */
  get(expr: string): Matcher {
    let m = this.map.get(expr);
    if (!m) {
      m = compileMatcher(expr);
      if (this.map.size >= this.max) this.map.delete(this.map.keys().next().value as string);
      this.map.set(expr, m);
    }
    return m;
  }
}

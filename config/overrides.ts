/**
 * A provider's `overrides` (`projects[].providers[].overrides`, network glob → upstream settings
 * merged into every upstream the provider generates; an endpoint shortcut's own keys land there)
 * validated as what they are: upstream settings. The providers plugin's schema takes them as any
 * object, so without this check an unknown or misspelt upstream key, or a key eRPC has and svc
 * refuses, would pass `svc validate` inside a shortcut and be dropped when the upstream is made.
 */
import { Type, type TObject, type TSchema } from '@sinclair/typebox';
import { problemsOf } from './problems.ts';
import { validatorFor } from './validator.ts';
import { isConfigObject, pathOf } from './normalize.ts';
import type { ConfigProblem } from './types.ts';

const partials = new WeakMap<TSchema, TObject>();

/** The upstream entry schema of an assembled config schema, every key optional; undefined without one. */
function partialUpstream(schema: TObject): TObject | undefined {
  const project = (schema.properties.projects as { items?: TObject } | undefined)?.items;
  const upstream = (project?.properties?.upstreams as { items?: TObject } | undefined)?.items;
  if (!upstream?.properties) return undefined;
  let p = partials.get(upstream);
  if (!p) {
    p = Type.Partial(upstream) as TObject;
    partials.set(upstream, p);
  }
  return p;
}

/** The schema problems of one value (load.ts `schemaProblems`, which imports this module). */
function problemsIn(value: unknown, schema: TObject): ConfigProblem[] {
  const { validate, compiled } = validatorFor(schema);
  return validate(value) ? [] : problemsOf(validate.errors ?? [], compiled());
}

/**
 * The problems of every provider's overrides, checked against the upstream schema (no key is
 * required there), with their full paths (`projects[0].providers[1].overrides["*"].failsafe`).
 * @param doc the normalised document, after it passed the schema
 * @param schema the assembled config schema
 */
export function overrideProblems(doc: unknown, schema: TObject): ConfigProblem[] {
  const up = partialUpstream(schema);
  const projects = isConfigObject(doc) ? doc.projects : undefined;
  if (!up || !Array.isArray(projects)) return [];
  const out: ConfigProblem[] = [];
  projects.forEach((p, pi) => {
    if (!isConfigObject(p) || !Array.isArray(p.providers)) return;
    p.providers.forEach((pr, i) => {
      if (!isConfigObject(pr) || !isConfigObject(pr.overrides)) return;
      for (const [glob, o] of Object.entries(pr.overrides)) {
        const base = pathOf(`projects[${pi}].providers[${i}].overrides`, glob);
        for (const e of problemsIn(o, up)) out.push({ path: e.path ? `${base}${e.path.startsWith('[') ? '' : '.'}${e.path}` : base, message: e.message });
      }
    });
  });
  return out;
}

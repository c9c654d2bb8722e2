/**
 * The mutation scores of the modules that implement the wire rules (docs/mutation.md), as
 * measured by StrykerJS (`npm run mutation -- --mutate <module>`), for the conformance table
 * (bin/gen-conformance.ts renders them). Update both together after a run.
 */

/** One module's last measured run. */
export interface ModuleScore {
  /** The module, relative to the repository root. */
  readonly module: string;
  /** Mutants that compiled (the TypeScript checker's compile errors are not counted). */
  readonly mutants: number;
  /** Killed or timed out: some test failed. */
  readonly killed: number;
  /** Left over after the run, each explained in docs/mutation.md (equivalent, or killed by a test added after it). */
  readonly survived: number;
}

/** When and with what the scores were measured. */
export const MUTATION_RUN = 'StrykerJS 9.6.1 (mocha runner, TypeScript checker), 2026-11-28 and 2026-11-29, on the 2-core development machine';

/** The target score of the wire modules, percent. */
export const MUTATION_TARGET = 85;

/** The scores, in the order of `WIRE_MODULES` (stryker.config.mjs). */
export const MUTATION_SCORES: readonly ModuleScore[] = [
  { module: 'core/wire/jsonrpc.ts', mutants: 240, killed: 234, survived: 6 },
  { module: 'lib/json-scan.ts', mutants: 330, killed: 330, survived: 0 },
  { module: 'core/wire/errors.ts', mutants: 146, killed: 145, survived: 1 },
  { module: 'core/wire/errors-wire.ts', mutants: 106, killed: 105, survived: 1 },
  { module: 'core/http/serve.ts', mutants: 119, killed: 111, survived: 8 },
  { module: 'plugins/headers/index.ts', mutants: 158, killed: 158, survived: 0 },
  { module: 'plugins/multiplex/index.ts', mutants: 72, killed: 69, survived: 3 },
  { module: 'plugins/directives/index.ts', mutants: 124, killed: 118, survived: 6 },
  { module: 'plugins/directives/api.ts', mutants: 32, killed: 32, survived: 0 },
  { module: 'plugins/admin/methods.ts', mutants: 235, killed: 231, survived: 4 },
  { module: 'plugins/healthcheck/index.ts', mutants: 152, killed: 151, survived: 1 },
  { module: 'plugins/healthcheck/evaluate.ts', mutants: 112, killed: 112, survived: 0 },
];

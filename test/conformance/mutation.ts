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
export const MUTATION_SCORES: readonly ModuleScore[] = [];

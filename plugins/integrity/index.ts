/**
 * integrity plugin (issue #14): being written.
 */
import type { Plugin } from '../../core/plugin-api.ts';

/** Creates the integrity plugin. */
export function integrityPlugin(): Plugin {
  return { name: 'integrity', apply() {} };
}

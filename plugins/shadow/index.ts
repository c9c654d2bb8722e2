/**
 * shadow plugin (issue #14): being written.
 */
import type { Plugin } from '../../core/plugin-api.ts';

/** Creates the shadow plugin. */
export function shadowPlugin(): Plugin {
  return { name: 'shadow', apply() {} };
}

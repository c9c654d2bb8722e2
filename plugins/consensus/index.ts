/**
 * consensus plugin (issue #14): being written.
 */
import type { Plugin } from '../../core/plugin-api.ts';

/** Creates the consensus plugin. */
export function consensusPlugin(): Plugin {
  return { name: 'consensus', apply() {} };
}

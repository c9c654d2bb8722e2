/**
 * StrykerJS mocha test runner for mocha 12 (loaded by stryker.config.mjs instead of the plain
 * `@stryker-mutator/mocha-runner`).
 *
 * `@stryker-mutator/mocha-runner` 9.x (the last major that runs on Node 20) loads mocha's CLI
 * helpers with `require('<mocha>/lib/cli/options')`, `.../run-helpers` and `.../collect-files`.
 * Mocha 12 ships those three files as `.cjs`, which `require` does not try, so the runner fails
 * at import time ("Cannot find module"); the 10.x runner has the same requires (its fallback
 * imports `options.mjs`, which mocha 12.0.x does not have either) and needs Node 22.
 *
 * This module lets an extension-less request for a file under mocha's `lib/cli/` fall back to
 * its `.cjs` twin (only there, only when the plain request fails), then re-exports the real
 * runner's plugins and option schema unchanged. Nothing else about the runner is altered.
 */
import Module, { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const mochaCli = path.join(path.dirname(require.resolve('mocha/package.json')), 'lib', 'cli') + path.sep;

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  try {
    return resolveFilename.call(this, request, ...rest);
  } catch (e) {
    if (typeof request === 'string' && request.startsWith(mochaCli) && path.extname(request) === '') {
      return resolveFilename.call(this, `${request}.cjs`, ...rest);
    }
    throw e;
  }
};

const runner = await import('@stryker-mutator/mocha-runner');

export const strykerPlugins = runner.strykerPlugins;
export const strykerValidationSchema = runner.strykerValidationSchema;
export const createMochaTestRunnerFactory = runner.createMochaTestRunnerFactory;

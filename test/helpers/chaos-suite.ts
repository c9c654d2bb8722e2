/**
 * The hostile suite (test/chaos/*.test.ts) as one mocha spec file, for parallel runs.
 *
 * In parallel mode mocha hands each spec file to a worker process on its own, so every chaos file
 * would start its own deployment (three anvil nodes, Redis, PostgreSQL, svc), several at once,
 * and a class that compares counters with the deployment's earlier state (class 4's upstream
 * error count) would see another deployment's start-up instead. .mocharc.cjs therefore queues
 * this file in place of the chaos files when it runs in parallel: importing them here, in name
 * order, registers every class's `describe` in one worker, which shares one deployment across
 * the folder exactly as a serial run does (test/chaos/harness.ts).
 */
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const CHAOS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'chaos');

for (const f of readdirSync(CHAOS_DIR)
  .filter((n) => n.endsWith('.test.ts'))
  .sort()) {
  await import(pathToFileURL(join(CHAOS_DIR, f)).href);
}

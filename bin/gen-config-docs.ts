/**
 * `npm run docs:config`: regenerates the two generated sections of the user docs, so they can
 * never drift from what svc validates and answers:
 * - the config reference (between `REFERENCE_START`/`REFERENCE_END`) in docs/configuration.md,
 *   rendered from the schema that the default preset's plugins assemble;
 * - the error table (between `ERRORS_START`/`ERRORS_END`) in docs/http-interface.md, rendered
 *   from `ERROR_TABLE` (core/wire/errors-wire.ts; spec "Errors");
 * - the eRPC key table of docs/migrating-from-erpc.md (config/erpc-doc.ts).
 * Each file is rewritten only when its section changed. test/unit/core/docs.test.ts fails when
 * a checked-in page no longer matches.
 * @throws Error (exit code 1) when a page lacks its markers
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildConfigSchema } from '../config/schema.ts';
import { ERRORS_END, ERRORS_START, REFERENCE_END, REFERENCE_START, renderConfigReference, renderErrorTable, spliceBetween } from '../config/docs.ts';
import { ERPC_TABLE_END, ERPC_TABLE_START, renderErpcKeyTable } from '../config/erpc-doc.ts';
import { ERROR_TABLE } from '../core/wire/errors-wire.ts';
import { PACKAGE_ROOT } from '../core/wire/version.ts';
import { defaultPreset } from '../presets/default.ts';

/** Splices `content` between the markers of `page` (relative to the package root); writes the file only when that changes it. */
function regenerate(page: string, start: string, end: string, content: string): void {
  const file = join(PACKAGE_ROOT, page);
  const before = readFileSync(file, 'utf8');
  const after = spliceBetween(before, start, end, content);
  if (after === before) {
    process.stdout.write(`${page} up to date\n`);
    return;
  }
  writeFileSync(file, after);
  process.stdout.write(`${page} updated\n`);
}

const schema = buildConfigSchema(defaultPreset().flatMap((p) => (p.schema ? [p.schema] : [])));
regenerate('docs/configuration.md', REFERENCE_START, REFERENCE_END, renderConfigReference(schema));
regenerate('docs/http-interface.md', ERRORS_START, ERRORS_END, renderErrorTable(ERROR_TABLE));
regenerate('docs/migrating-from-erpc.md', ERPC_TABLE_START, ERPC_TABLE_END, renderErpcKeyTable(schema));

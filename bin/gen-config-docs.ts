/**
 * `npm run docs:config`: regenerates the config reference in README.md from the schema that
 * the default preset's plugins assemble.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildConfigSchema } from '../core/config/schema.ts';
import { ERRORS_END, ERRORS_START, renderConfigReference, renderErrorTable, spliceBetween, spliceReference } from '../core/config/docs.ts';
import { ERROR_TABLE } from '../core/errors-wire.ts';
import { PACKAGE_ROOT } from '../core/version.ts';
import { defaultPreset } from '../presets/default.ts';

const schema = buildConfigSchema(defaultPreset().flatMap((p) => (p.schema ? [p.schema] : [])));
const file = join(PACKAGE_ROOT, 'README.md');
const withRef = spliceReference(readFileSync(file, 'utf8'), renderConfigReference(schema));
writeFileSync(file, spliceBetween(withRef, ERRORS_START, ERRORS_END, renderErrorTable(ERROR_TABLE)));
process.stdout.write('README.md config reference updated\n');

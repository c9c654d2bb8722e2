#!/usr/bin/env node
/**
 * `npm run build`: compiles core/, lib/, plugins/, presets/ and bin/ with tsc
 * (tsconfig.build.json) to dist/, keeping the folder layout (core/wire/version.ts finds
 * package.json at `../package.json` from its own file), then
 *
 * - rewrites relative `.ts` specifiers in the emitted `.d.ts` files to `.js`: tsc's
 *   `rewriteRelativeImportExtensions` rewrites them in the JavaScript only, and a published
 *   declaration must not point at a source file the package does not ship;
 * - removes outputs whose source is gone (dist/ is updated in place, never deleted first, so a
 *   running `bin/svc.js` or a concurrent test never sees it missing);
 * - writes dist/package.json with svc's version and `"type": "module"`: compiled
 *   dist/core/wire/version.js reads the version from `../../package.json` relative to its own file,
 *   which is dist/package.json (core/wire/version.ts, run from sources, reads the root one);
 * - compiles the config validator of each built-in preset's schema ahead of time into
 *   dist/config/validators/ (config/validator.ts), so `svc start` loads it instead of compiling
 *   it (0.3 s and about 25 MiB of resident memory at every start).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const r = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
if (r.status !== 0) process.exit(r.status ?? 1);

/** Every file under a folder. */
function* walk(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* walk(p);
    else yield p;
  }
}

// `from './x.ts'`, `import('./x.ts')`, `export ... from "../y.mts"`: relative specifiers only.
const SPECIFIER = /((?:from|import)\s*\(?\s*)(['"])(\.{1,2}\/[^'"]*?)\.([mc]?)ts\2/g;
const OUTPUT = /(\.d\.ts|\.js\.map|\.js|\.d\.ts\.map)$/;

let rewritten = 0;
let pruned = 0;
const STUB = join(dist, 'package.json');
const VALIDATORS = join(dist, 'config', 'validators');
// Plugin assets read at run time from beside their module (the bds plugin's .proto files): copied to dist/, pruned with their source.
const ASSET = /\.proto$/;
for (const file of walk(join(root, 'plugins'))) {
  if (!ASSET.test(file)) continue;
  const out = join(dist, relative(root, file));
  const text = readFileSync(file);
  mkdirSync(dirname(out), { recursive: true });
  if (!existsSync(out) || !readFileSync(out).equals(text)) writeFileSync(out, text);
}
for (const file of walk(dist)) {
  if (file === STUB || file.startsWith(VALIDATORS)) continue;
  if (ASSET.test(file)) {
    if (!existsSync(join(root, relative(dist, file)))) {
      rmSync(file);
      pruned++;
    }
    continue;
  }
  const source = join(root, relative(dist, file)).replace(OUTPUT, '.ts');
  if (!OUTPUT.test(file) || !existsSync(source)) {
    rmSync(file);
    pruned++;
    continue;
  }
  if (!file.endsWith('.d.ts')) continue;
  const text = readFileSync(file, 'utf8');
  const out = text.replace(SPECIFIER, (_m, pre, q, path, m) => `${pre}${q}${path}.${m}js${q}`);
  if (out !== text) {
    writeFileSync(file, out);
    rewritten++;
  }
}
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
// `name` + `exports` let the compiled plugins import `svc-proxy/plugin` by self-reference: from
// dist/plugins/<name>/ the nearest package.json is this one, so 'svc-proxy/plugin' resolves to
// dist/core/plugin-api.js, the very module instance core's own relative imports load (one copy
// of every class, in a clone and in the installed tarball alike).
// The same entries as package.json's, each its `import` target relative to dist/ (the plugin
// contracts `./plugins/*` included).
const distExports = Object.fromEntries(
  Object.entries(pkg.exports)
    .filter(([, target]) => typeof target === 'object' && typeof target.import === 'string')
    .map(([entry, target]) => [entry, target.import.replace(/^\.\/dist\//, './')]),
);
const stub = `${JSON.stringify({ '//': 'written by scripts/build.mjs: core/wire/version.ts reads the version (compiled: dist/core/wire/version.js reads ../../package.json); plugins import svc-proxy/plugin by self-reference', name: pkg.name, version: pkg.version, type: 'module', private: true, exports: distExports }, null, 2)}\n`;
if (!existsSync(STUB) || readFileSync(STUB, 'utf8') !== stub) writeFileSync(STUB, stub);

await precompileValidators();

const left = [...walk(dist)].filter((f) => f.endsWith('.d.ts') && /(?:from|import)\s*\(?\s*['"]\.{1,2}\/[^'"]*\.[mc]?ts['"]/.test(readFileSync(f, 'utf8')));
if (left.length) {
  process.stderr.write(`build: .ts specifiers left in ${left.map((f) => relative(root, f)).join(', ')}\n`);
  process.exit(1);
}
if (process.env.SVC_BUILD_VERBOSE) process.stdout.write(`build: ${rewritten} declaration files rewritten, ${pruned} stale outputs removed\n`);

/**
 * Writes the standalone validator of each built-in preset's config schema (the schema
 * createProxy assembles from the preset's fragments) and removes any other file there.
 */
async function precompileValidators() {
  const url = (p) => pathToFileURL(join(dist, p)).href;
  const { buildConfigSchema } = await import(url('config/schema.js'));
  const { precompiledName, precompiledSource } = await import(url('config/validator.js'));
  const { defaultPreset, minimalPreset } = await import(url('presets/index.js'));
  mkdirSync(VALIDATORS, { recursive: true });
  const keep = new Set();
  for (const preset of [defaultPreset, minimalPreset]) {
    const schema = buildConfigSchema(preset().flatMap((p) => (p.schema ? [p.schema] : [])));
    const name = precompiledName(JSON.stringify(schema));
    keep.add(name);
    const file = join(VALIDATORS, name);
    writeFileSync(file, await precompiledSource(schema));
  }
  for (const f of readdirSync(VALIDATORS)) if (!keep.has(f)) rmSync(join(VALIDATORS, f));
}

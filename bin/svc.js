#!/usr/bin/env node
// Entry point of the `svc` command: runs the compiled CLI (dist/bin/svc.js, from bin/svc.ts;
// `npm run build`, which `npm ci` runs through the `prepare` script). svc itself needs no
// TypeScript loader. A config or preset named on the command line as a .ts/.mts/.cts file is
// the user's own TypeScript: it loads through tsx when tsx is installed (in the working
// directory's project, else beside svc); compile it to .js to run without tsx.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const tsFile = process.argv
  .slice(2)
  .map((a) => a.slice(a.indexOf('=') + 1))
  .find((a) => /\.[mc]?ts$/i.test(a) && !/\.d\.[mc]?ts$/i.test(a));
if (tsFile) {
  let loader;
  for (const base of [join(process.cwd(), 'package.json'), import.meta.url]) {
    try {
      loader = createRequire(base).resolve('tsx');
      break;
    } catch {
      // not installed there
    }
  }
  if (!loader) {
    process.stderr.write(`${tsFile} is TypeScript: install tsx in your project (npm i -D tsx) or compile it to JavaScript\n`);
    process.exit(1);
  }
  await import(pathToFileURL(loader).href); // registers tsx's loaders, as `node --import tsx` does
}

try {
  await import('../dist/bin/svc.js');
} catch (e) {
  if (e?.code === 'ERR_MODULE_NOT_FOUND' && String(e.message).includes(new URL('../dist/bin/svc.js', import.meta.url).pathname)) {
    process.stderr.write('svc is not built: run `npm run build` (dist/bin/svc.js is missing)\n');
    process.exit(1);
  }
  throw e;
}

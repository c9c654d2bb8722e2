/**
 * The operator page's static files: the page itself (page/index.html, app.js, style.css, next to
 * this module in the sources and shipped as `plugins/admin/ui/page/` in the package) and uPlot
 * (npm `uplot`, resolved from svc's own dependencies, never a CDN). Read once, on first use, and
 * kept in memory (about 60 KB). They hold no data: the page fetches everything with the operator's
 * credential.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** One static file as served. */
export interface Asset {
  /** `Content-Type` value. */
  type: string;
  body: Buffer;
}

/** The served names (the last path segment under `/admin/ui/`) and where each comes from. */
const FILES: Record<string, { from: 'page' | 'uplot'; file: string; type: string }> = {
  '': { from: 'page', file: 'index.html', type: 'text/html; charset=utf-8' },
  'app.js': { from: 'page', file: 'app.js', type: 'text/javascript; charset=utf-8' },
  'style.css': { from: 'page', file: 'style.css', type: 'text/css; charset=utf-8' },
  'uplot.js': { from: 'uplot', file: 'uplot/dist/uPlot.iife.min.js', type: 'text/javascript; charset=utf-8' },
  'uplot.css': { from: 'uplot', file: 'uplot/dist/uPlot.min.css', type: 'text/css; charset=utf-8' },
};

/**
 * The page folder: next to this module when run from sources; from the compiled module
 * (dist/plugins/admin/ui/) the package's `plugins/admin/ui/page/` (tsc copies no HTML).
 */
function pageDir(): string {
  const candidates = [new URL('./page/', import.meta.url), new URL('../../../../plugins/admin/ui/page/', import.meta.url)];
  for (const c of candidates) {
    const dir = fileURLToPath(c);
    if (existsSync(`${dir}index.html`)) return dir;
  }
  throw new Error('admin ui: the page files (plugins/admin/ui/page/) are not installed');
}

const cache = new Map<string, Asset>();

/**
 * A static file of the page by served name.
 * @param name '' for the page, else `app.js`, `style.css`, `uplot.js` or `uplot.css`
 * @returns undefined for any other name
 * @throws Error when the file is missing from the installation (a broken install, reported as 500)
 */
export function readAsset(name: string): Asset | undefined {
  const f = Object.hasOwn(FILES, name) ? FILES[name] : undefined;
  if (!f) return undefined;
  let a = cache.get(name);
  if (!a) {
    const path = f.from === 'page' ? `${pageDir()}${f.file}` : createRequire(import.meta.url).resolve(f.file);
    a = { type: f.type, body: readFileSync(path) };
    cache.set(name, a);
  }
  return a;
}

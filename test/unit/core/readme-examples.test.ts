import { readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';
import { readConfigFile } from '../../../core/config/load.ts';
import { createLogger } from '../../../core/logger.ts';
import { createProxy } from '../../../core/proxy.ts';
import { PACKAGE_ROOT } from '../../../core/version.ts';
import { defaultPreset } from '../../../presets/default.ts';

const readme = readFileSync(join(PACKAGE_ROOT, 'README.md'), 'utf8');
const blocks = (lang: string) => [...readme.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1] as string);

describe('README config examples validate against the default preset', () => {
  const env = { PROVIDER_A_KEY: 'k', PROVIDER_B_KEY: 'k', HOSTNAME: 'h', HEALTHCHECK_SECRET: 's', OTEL_TOKEN: 't', SVC_SECRET: 's', ADMIN_SECRET: 'a' };
  blocks('yaml').forEach((text, i) => {
    it(`yaml example #${i + 1}`, () => {
      expect(() => createProxy({ config: parse(text), plugins: defaultPreset(), logger: createLogger('silent'), env })).to.not.throw();
    });
  });
  blocks('ts')
    .filter((t) => t.includes('defineConfig('))
    .forEach((text, i) => {
      it(`TypeScript config example #${i + 1}`, async () => {
        // README examples import from the package root, so the temp file lives there.
        const file = join(PACKAGE_ROOT, `.readme-example-${process.pid}-${i}.ts`);
        writeFileSync(file, text);
        try {
          const raw = await readConfigFile(file);
          expect(() => createProxy({ config: raw, plugins: defaultPreset(), logger: createLogger('silent') })).to.not.throw();
        } finally {
          rmSync(file, { force: true });
        }
      });
    });
});

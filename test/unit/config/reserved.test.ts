/**
 * Config keys and ids svc reserves: `__proto__`, `constructor` and
 * `prototype` are refused anywhere in a config (they reach object prototypes when a config is
 * copied), and project ids `admin` and `healthcheck` are refused since those paths are svc's.
 * Checked through the same `createProxy` path `svc validate` and start-up use.
 */
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../../../config/load.ts';
import { createProxy } from '../../../core/host/create.ts';
import { createLogger } from '../../../lib/logger.ts';
import { defaultPreset } from '../../../presets/default.ts';

function problems(raw: unknown): Array<{ path: string; message: string }> {
  try {
    createProxy({ config: raw, plugins: defaultPreset(), logger: createLogger('silent') });
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
}

describe('config: reserved keys and project ids', () => {
  it('refuses __proto__, constructor and prototype anywhere, naming each path (YAML and JSON)', () => {
    const yaml = parseYaml(`
server:
  constructor: 1
projects:
  - id: main
    upstreams:
      - endpoint: http://127.0.0.1:8545
        jsonRpc:
          headers:
            prototype: x
    __proto__:
      polluted: true
`);
    const p = problems(yaml);
    expect(p.map((x) => x.path).sort()).to.deep.equal(['projects[0].__proto__', 'projects[0].upstreams[0].jsonRpc.headers.prototype', 'server.constructor']);
    for (const x of p) expect(x.message).to.match(/is not allowed/);
    const json = JSON.parse('{"projects":[{"id":"main","networkDefaults":{"__proto__":{"x":1}}}]}') as unknown;
    expect(problems(json).map((x) => x.path)).to.deep.equal(['projects[0].networkDefaults.__proto__']);
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
  });

  for (const id of ['admin', 'healthcheck', 'Admin']) {
    it(`refuses project id "${id}"`, () => {
      const p = problems({ projects: [{ id }] });
      expect(p).to.have.length(1);
      expect(p[0]!.path).to.equal('projects[0].id');
      expect(p[0]!.message).to.match(/reserved/);
    });
  }

  it('accepts ordinary ids and keys', () => {
    expect(problems({ projects: [{ id: 'main' }, { id: 'administration' }] })).to.deep.equal([]);
  });
});

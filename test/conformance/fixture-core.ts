/**
 * Shared set-up of the conformance files of spec sections 1-3 and 5-9: one real anvil node and
 * one real svc in front of it with two upstreams (`a`, `b`) on project `main`, a second project
 * `keys` guarded by an in-memory API-key store, an admin secret and the metrics listener.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ConfigError, type ConfigProblem } from '../../config/load.ts';
import { NO_CACHE, startSvc, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';

/** Admin secret of the fixture. */
export const ADMIN = 'admin-secret-0123456789abcdef';
/** Header carrying the admin secret. */
export const ADMIN_H = Object.freeze({ 'x-svc-secret-token': ADMIN });

/** A JSON-RPC request object; `params` omitted when undefined. */
export const rpc = (method: string, params?: unknown, id: unknown = 1): Record<string, unknown> => ({
  jsonrpc: '2.0',
  id,
  method,
  ...(params === undefined ? {} : { params }),
});

/** A running fixture. */
export interface CoreFixture {
  anvil: AnvilHandle;
  svc: SvcHandle;
  /** `/main/evm/<chainId>` */
  path: string;
  /** Calls an admin method with the admin secret. */
  admin(method: string, params?: unknown): Promise<SvcResponse>;
  /** Value of the first series of `name` whose labels include every given pair; undefined when none. */
  metric(name: string, labels?: Record<string, string>): Promise<number | undefined>;
  /** The whole /metrics text. */
  scrape(): Promise<string>;
  close(): Promise<void>;
}

/**
 * Starts anvil and svc.
 * @param extra top-level config keys merged over the base config (e.g. `server`)
 * @param mainExtra keys merged into project `main`
 * @param moreProjects further projects, built once anvil runs
 * @param mineBlocks blocks mined before svc starts (anvil finalizes latest - 64)
 */
export async function startCoreFixture(
  extra: Record<string, unknown> = {},
  mainExtra: Record<string, unknown> = {},
  moreProjects: (anvil: AnvilHandle) => object[] = () => [],
  mineBlocks = 0,
): Promise<CoreFixture> {
  const anvil = await startAnvil();
  if (mineBlocks > 0) await anvil.rpc('anvil_mine', [`0x${mineBlocks.toString(16)}`]);
  const chainId = anvil.chainId;
  let svc: SvcHandle;
  try {
    const config: Record<string, unknown> = {
      ...NO_CACHE,
      logLevel: 'error',
      metrics: { enabled: true, port: 0 },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId }, selectionPolicy: { evalInterval: '100ms' } }],
          upstreams: [
            { id: 'a', endpoint: anvil.url, evm: { chainId } },
            { id: 'b', endpoint: anvil.url, evm: { chainId } },
          ],
          ...mainExtra,
        },
        {
          id: 'keys',
          networks: [{ architecture: 'evm', evm: { chainId } }],
          upstreams: [{ id: 'k', endpoint: anvil.url, evm: { chainId } }],
          auth: { strategies: [{ type: 'database', connector: { id: 'mem', driver: 'memory' } }] },
        },
        ...moreProjects(anvil),
      ],
      ...extra,
    };
    // An `undefined` in `extra` removes a base key (e.g. `database: undefined` keeps the default cache).
    for (const [k, v] of Object.entries(config)) if (v === undefined) delete config[k];
    svc = await startSvc(config);
  } catch (e) {
    await anvil.stop();
    throw e;
  }
  const scrape = async (): Promise<string> => (await fetch(svc.metricsUrl as string)).text();
  return {
    anvil,
    svc,
    path: `/main/evm/${chainId}`,
    admin: (method, params) => svc.post('/admin', rpc(method, params), ADMIN_H),
    scrape,
    async metric(name, labels = {}) {
      for (const line of (await scrape()).split('\n')) {
        if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
        if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
      }
      return undefined;
    },
    async close() {
      await svc.close();
      await anvil.stop();
    },
  };
}

/**
 * Asserts a project call refused by auth: HTTP 401, `ErrAuthUnauthorized` (-32016), no result.
 * The spec names no error for a refused credential (§2.3, §5); this is svc's, the one every
 * auth refusal gets, so an answer refused for another reason (a failed start-up, a rate limit,
 * a routing error) does not pass.
 */
export function expectUnauthorized(r: SvcResponse, what = 'refused by auth'): void {
  expect(r.status, `${what}: ${r.text}`).to.equal(401);
  expect(r.json?.result, what).to.equal(undefined);
  expect(r.json?.error?.code, what).to.equal(-32016);
  expect(r.json?.error?.data?.code, what).to.equal('ErrAuthUnauthorized');
}

/**
 * Asserts a call refused by the key's `rateLimitBudget` (spec §2.3, §5 #4): HTTP 429,
 * `ErrAuthRateLimitRuleExceeded` (-32005, message `rate-limit exceeded`), no result.
 */
export function expectBudgetExceeded(r: SvcResponse, what = 'over the key budget'): void {
  expect(r.status, `${what}: ${r.text}`).to.equal(429);
  expect(r.json?.result, what).to.equal(undefined);
  expect(r.json?.error, what).to.deep.include({ code: -32005, message: 'rate-limit exceeded' });
  expect(r.json?.error?.data?.code, what).to.equal('ErrAuthRateLimitRuleExceeded');
}

/**
 * Starts svc with a config that must be refused and returns the problems: the start-up fails
 * with a `ConfigError` (not any error: a port in use or a crash would not pass), and a server
 * that started after all fails the assertion (it is closed first).
 */
export async function configProblems(config: object): Promise<ConfigProblem[]> {
  let err: unknown;
  await startSvc(config).then(
    async (s) => {
      await s.close();
      expect.fail('the config was accepted');
    },
    (e: unknown) => (err = e),
  );
  expect(err).to.be.instanceOf(ConfigError);
  return (err as ConfigError).problems;
}

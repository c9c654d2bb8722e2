/**
 * The ten admin methods (spec §4.4, errors §7), and `svc_reloadConfig` (config hot reload).
 * Method names are case-sensitive. No method edits config at run time (rule 6): API keys live in
 * their database, cordons in the health tracker; `svc_reloadConfig` re-reads the config file,
 * as SIGHUP does.
 */
import type { PluginHost, Project } from 'svc-proxy/plugin';
import { ConfigError, ErrEndpointUnsupported, ErrInvalidRequest, ErrProjectNotFound, SvcError } from 'svc-proxy/plugin/errors';
import { type ApiKeyManager, AUTH_SERVICE } from 'svc-proxy/plugins/auth';
import { SELECTION_API_SERVICE } from 'svc-proxy/plugins/selection';
import { redactText } from 'svc-proxy/util';
import { latencyMsOf } from './health-view.ts';
import { redactConfig } from './redact.ts';

/** Default `svc_listApiKeys` page (spec §8). */
export const DEFAULT_PAGE = 50;
/** Default cordon reason (spec §2.1). */
export const DEFAULT_CORDON_REASON = 'admin: manual cordon';
/** Longest accepted cordon reason or method, characters. */
const MAX_TEXT = 256;

/** The admin's own error for a (projectId, connectorId) that resolves to no key store (spec §7). */
export class ErrServiceNotFound extends SvcError {
  static override readonly defaultCode = -32602;
  static override readonly httpStatus = 404;
}

/** An error that must stand as written (the message is the spec's §7 text). */
function invalid(message: string): ErrInvalidRequest {
  return new ErrInvalidRequest(`InvalidRequest: ${message}`);
}

/**
 * The single object param of the API-key and cordon methods (spec §4.4 rule 5, §7).
 * Positional args (`["main", "node"]`: a first element that is not an object, whatever the
 * count) are `InvalidRequest: first parameter must be an object`; no params, an empty list, or
 * an object followed by more elements are `InvalidRequest: requires params: [<shape>]`.
 * @throws ErrInvalidRequest with the spec's §7 text
 */
function objectParam(params: unknown, shape: string): Record<string, unknown> {
  if (!Array.isArray(params) || params.length === 0) throw invalid(`requires params: [${shape}]`);
  const p = params[0] as unknown;
  if (!p || typeof p !== 'object' || Array.isArray(p)) throw invalid('first parameter must be an object');
  if (params.length !== 1) throw invalid(`requires params: [${shape}]`);
  return p as Record<string, unknown>;
}

/**
 * The params of a method that takes none (`svc_taxonomy`, `svc_config`; spec §4.4, §7): absent,
 * `null`, `[]` or `{}` pass; anything else is `InvalidRequest: requires params: none`, as
 * `svc_project` refuses a wrong count, so a client that thinks it filters the answer learns it does not.
 * @throws ErrInvalidRequest with the spec's §7 text
 */
function noParams(params: unknown): void {
  if (params === undefined || params === null) return;
  if (Array.isArray(params) ? params.length === 0 : typeof params === 'object' && Object.keys(params).length === 0) return;
  throw invalid('requires params: none');
}

function requireString(o: Record<string, unknown>, field: string, shape: string): string {
  const v = o[field];
  if (typeof v !== 'string' || v === '' || v.length > 1024) throw invalid(`requires params: [${shape}] (${field} must be a non-empty string)`);
  return v;
}

const ADD_SHAPE = '{projectId, connectorId, apiKey, userId, rateLimitBudget?, enabled?}';
const LIST_SHAPE = '{projectId, connectorId, limit?, paginationToken?}';
const UPDATE_SHAPE = '{projectId, connectorId, apiKey, updates}';
const DELETE_SHAPE = '{projectId, connectorId, apiKey}';
const CORDON_SHAPE = '{projectId, upstream, method?, reason?}';

/** A method: params in, JSON result out; errors are SvcErrors with the spec's messages. */
type Method = (params: unknown) => Promise<unknown>;

/**
 * The methods of one svc.
 * @param host the plugin host (projects, config, services)
 */
export function adminMethods(host: PluginHost): ReadonlyMap<string, Method> {
  const projectOf = (id: unknown): Project => {
    const p = typeof id === 'string' ? host.projects.get(id) : undefined;
    if (!p) throw new ErrProjectNotFound(`project ${JSON.stringify(String(id).slice(0, 64))} is not configured`);
    return p;
  };
  const keysOf = (o: Record<string, unknown>, shape: string): ApiKeyManager => {
    const projectId = requireString(o, 'projectId', shape);
    const connectorId = requireString(o, 'connectorId', shape);
    const m = host.services.get(AUTH_SERVICE)?.apiKeys(projectId, connectorId);
    if (!m)
      throw new ErrServiceNotFound(
        `failed to find the service: project ${JSON.stringify(projectId.slice(0, 64))} has no database auth strategy with connector ${JSON.stringify(connectorId.slice(0, 64))}`,
      );
    return m;
  };
  const cordonTarget = (params: unknown) => {
    const o = objectParam(params, CORDON_SHAPE);
    const project = projectOf(requireString(o, 'projectId', CORDON_SHAPE));
    const upstream = requireString(o, 'upstream', CORDON_SHAPE);
    if (!project.upstreams.has(upstream)) throw invalid(`upstream ${JSON.stringify(upstream.slice(0, 64))} is not in project ${project.id}`);
    const method = o.method === undefined ? '*' : typeof o.method === 'string' && o.method !== '' && o.method.length <= MAX_TEXT ? o.method : undefined;
    if (method === undefined) throw invalid(`requires params: [${CORDON_SHAPE}] (method must be a method name or glob)`);
    const reason = o.reason === undefined ? undefined : typeof o.reason === 'string' && o.reason.length <= MAX_TEXT ? o.reason : undefined;
    if (o.reason !== undefined && reason === undefined)
      throw invalid(`requires params: [${CORDON_SHAPE}] (reason must be a string of at most ${MAX_TEXT} characters)`);
    return { project, upstream, method, reason };
  };

  const methods: Array<[string, Method]> = [
    [
      'svc_taxonomy',
      (params) => {
        noParams(params);
        return Promise.resolve({
          projects: [...host.projects.values()].map((p) => ({
            id: p.id,
            networks: [...p.networks.values()].map((n) => ({ id: n.id, upstreams: n.upstreams.map((u) => ({ id: u.id })) })),
          })),
        });
      },
    ],
    [
      'svc_config',
      (params) => {
        noParams(params);
        return Promise.resolve(redactConfig(JSON.parse(JSON.stringify(host.config)) as unknown));
      },
    ],
    [
      // Not one of the spec's ten: svc's config hot reload (docs/operations.md "Config reload").
      'svc_reloadConfig',
      async (params) => {
        noParams(params);
        try {
          return await host.reloadConfig();
        } catch (e) {
          if (!(e instanceof ConfigError)) throw e;
          // The lines `svc validate` prints, in one message (bounded); the running config keeps serving.
          // Redacted as `svc validate` prints them: a parse error may quote a line holding a secret.
          const lines = e.problems.map((p) => `${p.path || '(root)'}: ${redactText(p.message)}`);
          throw new ErrInvalidRequest(`config refused, the running config keeps serving: ${lines.join('; ').slice(0, 4000)}`);
        }
      },
    ],
    [
      'svc_project',
      (params) => {
        if (!Array.isArray(params) || params.length !== 1 || typeof params[0] !== 'string') throw invalid('requires params: [projectId]');
        const project = projectOf(params[0]);
        // The selection plugin's live order and decisions, when it is applied.
        const selection = host.services.get(SELECTION_API_SERVICE);
        return Promise.resolve({
          config: redactConfig(JSON.parse(JSON.stringify(project.config)) as unknown),
          networks: [...project.networks.values()].map((n) => {
            const state = selection?.state(project.id, n.id);
            return {
              id: n.id,
              primaryUpstream: state?.order?.[0] ?? n.upstreams[0]?.id,
              selection: state ?? null,
              recentDecisions: selection?.decisions(project.id, n.id).slice(-20) ?? [],
              upstreams: n.upstreams.map((u) => {
                const h = project.health.snapshot(u.id);
                return {
                  id: u.id,
                  requests: h.requests,
                  errorRate: h.errorRate,
                  throttleRate: h.throttleRate,
                  latencyMs: latencyMsOf(h),
                  blockHeadLag: h.blockHeadLag,
                  finalizationLag: h.finalizationLag,
                  cordoned: h.cordoned,
                  cordonReason: h.cordonReason,
                };
              }),
            };
          }),
        });
      },
    ],
    [
      'svc_addApiKey',
      async (params) => {
        const o = objectParam(params, ADD_SHAPE);
        const keys = keysOf(o, ADD_SHAPE);
        const apiKey = requireString(o, 'apiKey', ADD_SHAPE);
        const userId = requireString(o, 'userId', ADD_SHAPE);
        if (o.enabled !== undefined && typeof o.enabled !== 'boolean') throw invalid(`requires params: [${ADD_SHAPE}] (enabled must be a boolean)`);
        if (o.rateLimitBudget !== undefined && typeof o.rateLimitBudget !== 'string')
          throw invalid(`requires params: [${ADD_SHAPE}] (rateLimitBudget must be a string)`);
        const r = await asInvalid(() =>
          keys.add({ apiKey, userId, rateLimitBudget: o.rateLimitBudget as string | undefined, enabled: o.enabled as boolean | undefined }),
        );
        return { success: true, apiKey: r.key, userId: r.userId };
      },
    ],
    [
      'svc_listApiKeys',
      async (params) => {
        const o = objectParam(params, LIST_SHAPE);
        const keys = keysOf(o, LIST_SHAPE);
        const limit = o.limit === undefined ? DEFAULT_PAGE : Number(o.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalid(`requires params: [${LIST_SHAPE}] (limit must be an integer from 1 to 1000)`);
        if (o.paginationToken !== undefined && typeof o.paginationToken !== 'string')
          throw invalid(`requires params: [${LIST_SHAPE}] (paginationToken must be a string)`);
        return asInvalid(() => keys.list(limit, o.paginationToken as string | undefined));
      },
    ],
    [
      'svc_updateApiKey',
      async (params) => {
        const o = objectParam(params, UPDATE_SHAPE);
        const keys = keysOf(o, UPDATE_SHAPE);
        const apiKey = requireString(o, 'apiKey', UPDATE_SHAPE);
        const updates = o.updates;
        if (!updates || typeof updates !== 'object' || Array.isArray(updates)) throw invalid(`requires params: [${UPDATE_SHAPE}] (updates must be an object)`);
        await asInvalid(() => keys.update(apiKey, updates as Record<string, unknown>));
        return { success: true, apiKey, updated: updates };
      },
    ],
    [
      'svc_deleteApiKey',
      async (params) => {
        const o = objectParam(params, DELETE_SHAPE);
        const keys = keysOf(o, DELETE_SHAPE);
        const r = await asInvalid(() => keys.delete(requireString(o, 'apiKey', DELETE_SHAPE)));
        return { success: true, apiKey: r.key, userId: r.userId };
      },
    ],
    [
      'svc_cordonUpstream',
      (params) => {
        const t = cordonTarget(params);
        const reason = t.reason ?? DEFAULT_CORDON_REASON;
        t.project.health.cordon(t.upstream, t.method, reason);
        host.logger.debug({ project: t.project.id, upstream: t.upstream, method: t.method, reason }, 'upstream cordoned by admin');
        return Promise.resolve({ projectId: t.project.id, upstream: t.upstream, method: t.method, cordoned: true, reason });
      },
    ],
    [
      'svc_uncordonUpstream',
      (params) => {
        const t = cordonTarget(params);
        const previous = t.project.health.listCordoned().find((c) => c.upstream === t.upstream && c.method === t.method)?.reason;
        t.project.health.uncordon(t.upstream, t.method);
        return Promise.resolve({ projectId: t.project.id, upstream: t.upstream, method: t.method, cordoned: false, reason: t.reason ?? previous ?? '' });
      },
    ],
    [
      'svc_listCordoned',
      (params) => {
        const o = objectParam(params, '{projectId}');
        const project = projectOf(requireString(o, 'projectId', '{projectId}'));
        // Spec §4.4: wildcard cordons only; method cordons show in the gauge's labels.
        const cordoned = project.health
          .listCordoned()
          .filter((c) => c.method === '*')
          .map((c) => ({ upstream: c.upstream, reason: c.reason }));
        return Promise.resolve({ projectId: project.id, cordoned });
      },
    ],
  ];
  return new Map(methods);
}

/** A store's refusal (`api key not found`, a bad token…) as InvalidRequest; driver failures stay internal errors. */
async function asInvalid<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof SvcError) throw e;
    const msg = e instanceof Error ? e.message : String(e);
    if (/^(api key |paginationToken |updates\.|rateLimitBudget |missing or invalid userId)/.test(msg)) throw new ErrInvalidRequest(msg);
    throw e;
  }
}

/**
 * Whether an operator change must be replayed on the other workers and replicas: cordons always
 * (each process keeps its own), API-key changes only for a key store each process holds itself
 * (the memory driver); a Redis or PostgreSQL store is read by every process already, and a
 * replay there could bring back a key deleted in the store meanwhile.
 * @param method an admin method that succeeded
 * @param params its params as sent
 */
export function replayNeeded(host: PluginHost, method: string, params: unknown): boolean {
  if (!method.endsWith('ApiKey')) return true;
  const o = Array.isArray(params) ? (params[0] as { projectId?: unknown; connectorId?: unknown } | undefined) : undefined;
  if (typeof o?.projectId !== 'string' || typeof o.connectorId !== 'string') return false;
  const keys = host.services.get(AUTH_SERVICE)?.apiKeys(o.projectId, o.connectorId);
  return keys !== undefined && !keys.shared;
}

/**
 * The error of a method name svc does not have (spec §7: case-sensitive).
 * @param name the method as sent
 */
export function unsupported(name: string): ErrEndpointUnsupported {
  return new ErrEndpointUnsupported(`EndpointUnsupported: admin method ${name.slice(0, 64)} is not supported`);
}

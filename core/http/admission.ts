/**
 * The `admit` hook's request (spec §5 pay-per-request): built once the body is parsed, only when some plugin taps the hook (callers check
 * `hooks.admit.isUsed()` first, so a svc without such a plugin allocates nothing for it). Its answered tasks run after every call settled,
 * before the response is written; one may withhold the answer (a payment whose settlement was refused).
 */
import type { Admission, AnsweredTask, HeaderSink, ProxyHooks } from '../pipeline/hooks.ts';
import type { ExecutionRecord, HttpRequestInfo, Identity } from '../pipeline/context.ts';
import type { ParsedCall } from '../wire/jsonrpc.ts';
import type { Network, Project } from '../registry/project.ts';
import type { Logger } from '../../lib/logger.ts';
import { asSvcError, type SvcError } from '../wire/errors.ts';
import { normaliseNetworkId, type RouteHost } from './routing.ts';

/** What an admission is made of. */
export interface AdmissionFields {
  /** HTTP facts of the request (of the upgrade, for a WebSocket message). */
  http: HttpRequestInfo;
  project: Project;
  /** The URL's network, if any. */
  network?: Network;
  batch: boolean;
  calls: readonly ParsedCall[];
  transport: 'http' | 'websocket';
  identity?: Identity;
  /** The WebSocket connection the message arrived on. */
  session?: object;
  /** Resolves a network id of the project (creating one a provider offers), as serving a call would. */
  host: RouteHost;
}

/** One request's {@link Admission}. */
export class RequestAdmission implements Admission {
  readonly http: HttpRequestInfo;
  readonly project: Project;
  readonly network?: Network;
  readonly batch: boolean;
  readonly calls: readonly ParsedCall[];
  readonly transport: 'http' | 'websocket';
  readonly session?: object;
  identity?: Identity;
  /** Tasks registered by `admit` taps, in registration order. */
  tasks?: AnsweredTask[];
  private readonly host: RouteHost;

  /** @param f the request's facts (see {@link AdmissionFields}) */
  constructor(f: AdmissionFields) {
    this.http = f.http;
    this.project = f.project;
    this.network = f.network;
    this.batch = f.batch;
    this.calls = f.calls;
    this.transport = f.transport;
    this.session = f.session;
    this.identity = f.identity;
    this.host = f.host;
  }

  onAnswered(task: AnsweredTask): void {
    (this.tasks ??= []).push(task);
  }

  networkOf(call: ParsedCall): Promise<Network | undefined> {
    if (this.network) return Promise.resolve(this.network);
    const id = call.networkId === undefined ? undefined : normaliseNetworkId(call.networkId);
    return id === undefined ? Promise.resolve(undefined) : this.host.getNetwork(this.project, id);
  }
}

/**
 * Runs the `admit` hook for a parsed request (call only when `hooks.admit.isUsed()`).
 * @returns the admission (its identity may have changed)
 * @throws SvcError when a tap refuses the request as a whole
 */
export async function admitRequest(hooks: ProxyHooks, fields: AdmissionFields): Promise<RequestAdmission> {
  const admission = new RequestAdmission(fields);
  await hooks.admit.promise(admission);
  return admission;
}

/**
 * Runs an admission's answered tasks in order (each bounds its own time). A task that throws is logged; the answer stands.
 * @param records the calls' execution records, in body order
 * @returns the refusal a task answered instead of the calls' answers (a settlement refused), else undefined
 */
export async function runAnswered(
  admission: RequestAdmission | undefined,
  records: readonly ExecutionRecord[],
  sink: HeaderSink,
  logger: Logger,
): Promise<SvcError | undefined> {
  const tasks = admission?.tasks;
  if (!tasks) return undefined;
  for (const task of tasks) {
    try {
      const withheld = await task(records, sink);
      if (withheld) return asSvcError(withheld);
    } catch (e) {
      logger.error({ err: e instanceof Error ? e.stack : String(e) }, "an admitted request's answered task failed; the answer stands");
    }
  }
  return undefined;
}

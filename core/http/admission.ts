/**
 * The `admit` hook's request (spec §5 pay-per-request): built once the body is parsed, only when some plugin taps the hook, so a svc
 * without such a plugin allocates nothing for it. Its answered tasks run after every call settled, before the response is written.
 */
import type { Admission, AnsweredTask, HeaderSink, ProxyHooks } from '../pipeline/hooks.ts';
import type { ExecutionRecord, HttpRequestInfo, Identity } from '../pipeline/context.ts';
import type { ParsedCall } from '../wire/jsonrpc.ts';
import type { Network, Project } from '../registry/project.ts';
import type { Logger } from '../../lib/logger.ts';

/** One request's {@link Admission}. */
export class RequestAdmission implements Admission {
  /** Tasks registered by `admit` taps, in registration order. */
  tasks?: AnsweredTask[];

  constructor(
    readonly http: HttpRequestInfo,
    readonly project: Project,
    readonly network: Network | undefined,
    readonly batch: boolean,
    readonly calls: readonly ParsedCall[],
    readonly transport: 'http' | 'websocket',
    public identity: Identity | undefined,
    readonly session?: object,
  ) {}

  onAnswered(task: AnsweredTask): void {
    (this.tasks ??= []).push(task);
  }
}

/**
 * Runs the `admit` hook for a parsed request, or nothing while no plugin taps it.
 * @returns the admission (its identity may have changed), or undefined when the hook is unused
 * @throws SvcError when a tap refuses the request as a whole
 */
export async function admitRequest(hooks: ProxyHooks, fields: ConstructorParameters<typeof RequestAdmission>): Promise<RequestAdmission | undefined> {
  if (!hooks.admit.isUsed()) return undefined;
  const admission = new RequestAdmission(...fields);
  await hooks.admit.promise(admission);
  return admission;
}

/**
 * Runs an admission's answered tasks in order (each bounds its own time). A task that throws is logged; the answer stands.
 * @param records the calls' execution records, in body order
 */
export async function runAnswered(
  admission: RequestAdmission | undefined,
  records: readonly ExecutionRecord[],
  sink: HeaderSink,
  logger: Logger,
): Promise<void> {
  const tasks = admission?.tasks;
  if (!tasks) return;
  for (const task of tasks) {
    try {
      await task(records, sink);
    } catch (e) {
      logger.error({ err: e instanceof Error ? e.stack : String(e) }, "an admitted request's answered task failed; the answer stands");
    }
  }
}

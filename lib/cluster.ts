/**
 * svc's worker processes (`server.workers` > 1, docs/operations.md "Workers"): `svc start` runs
 * a primary that forks that many workers with node:cluster; every worker runs the whole proxy
 * and the workers share the listening socket. What one worker learns from an operator (a cordon,
 * an API key added through `/admin`) must reach the others, so the primary relays broadcasts:
 * a worker sends `{ svcBroadcast: topic, payload }`, the primary forwards it to every other
 * worker. Off the request path: only operator actions broadcast.
 */
import cluster from 'node:cluster';

/** Environment variable the primary sets on each worker: `<index>/<count>`, e.g. `1/4`. */
export const SVC_WORKER_ENV = 'SVC_WORKER';

/** Which worker this process is, when it is one of svc's workers. */
export interface WorkerInfo {
  /** 1-based index of this worker. */
  index: number;
  /** How many workers the primary runs (`server.workers`). */
  count: number;
}

/** A broadcast between workers, as it travels over the cluster IPC channel. */
export interface WorkerBroadcast {
  /** Topic, e.g. `admin` (the admin plugin replays operator calls). */
  svcBroadcast: string;
  /** Structured-cloneable payload. */
  payload: unknown;
}

/**
 * This process's place among svc's workers.
 * @returns undefined in a single-process svc (the default) and in the primary
 */
export function svcWorker(): WorkerInfo | undefined {
  if (!cluster.isWorker) return undefined;
  const m = /^(\d+)\/(\d+)$/.exec(process.env[SVC_WORKER_ENV] ?? '');
  if (!m) return undefined;
  return { index: Number(m[1]), count: Number(m[2]) };
}

/** Whether a message from the IPC channel is a worker broadcast. */
export function isWorkerBroadcast(m: unknown): m is WorkerBroadcast {
  return typeof m === 'object' && m !== null && typeof (m as { svcBroadcast?: unknown }).svcBroadcast === 'string';
}

/**
 * Sends a broadcast to every other worker (through the primary). A no-op outside svc's workers.
 * @param topic what the payload is about; receivers subscribe by topic
 * @param payload a structured-cloneable value (no functions, no class instances)
 */
export function broadcastToWorkers(topic: string, payload: unknown): void {
  if (!svcWorker() || !process.send) return;
  const m: WorkerBroadcast = { svcBroadcast: topic, payload };
  process.send(m);
}

/**
 * Subscribes to other workers' broadcasts of a topic. A no-op outside svc's workers.
 * @returns a function that unsubscribes
 */
export function onWorkerBroadcast(topic: string, receive: (payload: unknown) => void): () => void {
  if (!svcWorker()) return () => undefined;
  const listener = (m: unknown) => {
    if (isWorkerBroadcast(m) && m.svcBroadcast === topic) receive(m.payload);
  };
  process.on('message', listener);
  return () => process.off('message', listener);
}

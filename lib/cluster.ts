/**
 * svc's worker processes (`server.workers` > 1, docs/operations.md "Workers"): `svc start` runs
 * a primary that forks that many workers with node:cluster; every worker runs the whole proxy
 * and the workers share the listening socket. What one worker learns from an operator (a cordon,
 * an API key added through `/admin`) must reach the others, so the primary relays broadcasts:
 * a worker sends `{ svcBroadcast: topic, payload }`, the primary forwards it to every other
 * worker. Off the request path: only operator actions broadcast.
 *
 * Beyond one process (docs/operations.md "Fleet: shared state"), a plugin registers a
 * {@link FleetRelay}: it sees every broadcast made in this process (also in a single-process
 * svc) and carries it to the other replicas of the deployment; what another replica sent comes
 * back through {@link FleetRelayRegistration.deliver} to this process's receivers only (the
 * sibling workers get it from their own relay), so nothing is broadcast twice or echoed.
 */
import { randomUUID } from 'node:crypto';
import cluster from 'node:cluster';
import { ClaimSet, type ClaimOutcome } from './claim-set.ts';

/** Environment variable the primary sets on each worker: `<index>/<count>`, e.g. `1/4`. */
export const SVC_WORKER_ENV = 'SVC_WORKER';
/** Environment variable the primary sets on each worker: the replica id all its workers share. */
export const SVC_REPLICA_ENV = 'SVC_REPLICA_ID';

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

let ownReplica: string | undefined;

/**
 * The id of this replica in a fleet: one per `svc start` (every worker of one primary shares
 * the primary's, handed down in {@link SVC_REPLICA_ENV}), a random UUID otherwise. A fleet
 * relay tags what it sends with it (who made a change).
 * @returns the id, stable for the life of the process
 */
export function fleetReplicaId(): string {
  ownReplica ??= (cluster.isWorker ? process.env[SVC_REPLICA_ENV] : undefined) || randomUUID();
  return ownReplica;
}

/**
 * The environment of a worker the primary forks.
 * @param index 1-based worker index
 * @param count how many workers the primary runs
 * @returns {@link SVC_WORKER_ENV} and {@link SVC_REPLICA_ENV} (the primary's own replica id)
 */
export function workerEnv(index: number, count: number): Record<string, string> {
  return { [SVC_WORKER_ENV]: `${index}/${count}`, [SVC_REPLICA_ENV]: fleetReplicaId() };
}

/** Whether a message from the IPC channel is a worker broadcast. */
export function isWorkerBroadcast(m: unknown): m is WorkerBroadcast {
  return typeof m === 'object' && m !== null && typeof (m as { svcBroadcast?: unknown }).svcBroadcast === 'string';
}

/**
 * Carries this process's broadcasts to the other replicas of a fleet (the shared-state plugin
 * registers one when `sharedState` is configured).
 */
export interface FleetRelay {
  /**
   * Called synchronously for every {@link broadcastToWorkers} of this process, after the
   * sibling workers were sent it. Must return quickly (queue the work); an exception is
   * swallowed so the broadcaster (an admin call that already succeeded) never sees it.
   * @param topic the broadcast topic
   * @param payload the payload as broadcast (JSON-serialisable for a relay that leaves the process)
   */
  forward(topic: string, payload: unknown): void;
}

/** A registered {@link FleetRelay}. */
export interface FleetRelayRegistration {
  /**
   * Hands a broadcast that came from another replica to this process's
   * {@link onWorkerBroadcast} receivers of `topic`: here only, never to the sibling workers (each
   * has its own relay) and never back to a relay, so there is no echo. A receiver that throws is
   * skipped.
   */
  deliver(topic: string, payload: unknown): void;
  /** Unregisters the relay (idempotent). */
  remove(): void;
}

/** Registered relays (normally none or one; several svc instances in one process each add theirs). */
const relays = new Set<FleetRelay>();
/** Local receivers by topic, also outside svc's workers (a relay delivers to them). */
const receivers = new Map<string, Set<(payload: unknown) => void>>();

/**
 * Registers a relay that sees every broadcast of this process and may deliver broadcasts from
 * other replicas locally.
 * @param relay what forwards this process's broadcasts
 * @returns the registration: `deliver` for incoming broadcasts, `remove` on shutdown
 */
export function registerFleetRelay(relay: FleetRelay): FleetRelayRegistration {
  relays.add(relay);
  return {
    deliver: (topic, payload) => {
      for (const receive of [...(receivers.get(topic) ?? [])]) {
        try {
          receive(payload);
        } catch {
          // A receiver's failure is its own; the others still get the broadcast.
        }
      }
    },
    remove: () => {
      relays.delete(relay);
    },
  };
}

/**
 * Sends a broadcast to every other worker (through the primary) and to the registered fleet
 * relays. Outside svc's workers only the relays get it (none: a no-op).
 * @param topic what the payload is about; receivers subscribe by topic
 * @param payload a structured-cloneable, JSON-serialisable value (no functions, no class instances)
 */
export function broadcastToWorkers(topic: string, payload: unknown): void {
  if (svcWorker() && process.send) {
    const m: WorkerBroadcast = { svcBroadcast: topic, payload };
    process.send(m);
  }
  for (const relay of relays) {
    try {
      relay.forward(topic, payload);
    } catch {
      // The relay's problem: the broadcaster's change stands.
    }
  }
}

/**
 * Subscribes to other workers' broadcasts of a topic, and to broadcasts a fleet relay delivers
 * from other replicas (outside svc's workers only those).
 * @returns a function that unsubscribes
 */
export function onWorkerBroadcast(topic: string, receive: (payload: unknown) => void): () => void {
  // A wrapper, so one function subscribed twice is two subscriptions.
  const entry = (payload: unknown): void => receive(payload);
  let set = receivers.get(topic);
  if (!set) receivers.set(topic, (set = new Set()));
  set.add(entry);
  let listener: ((m: unknown) => void) | undefined;
  if (svcWorker()) {
    listener = (m: unknown) => {
      if (isWorkerBroadcast(m) && m.svcBroadcast === topic) receive(m.payload);
    };
    process.on('message', listener);
  }
  return () => {
    set.delete(entry);
    if (set.size === 0 && receivers.get(topic) === set) receivers.delete(topic);
    if (listener) process.off('message', listener);
  };
}

/** A worker's claim of an id, decided by the primary's {@link ClaimSet} of its scope. */
interface ClaimRequest {
  /** Request number, unique in the worker. */
  svcClaim: number;
  /** Which set: the same name in every worker (a connector's settings). */
  scope: string;
  id: string;
  /** How long the id is remembered, ms. */
  ttlMs: number;
  /** Most unexpired ids of the scope (the first claim of a scope sets it). */
  maxItems: number;
}

/** The primary's answer to a {@link ClaimRequest}. */
interface ClaimAnswer {
  svcClaimAnswer: number;
  outcome: ClaimOutcome;
}

/** Longest scope and id of a claim, characters (both come from config and hashes, bounded anyway). */
const MAX_CLAIM_TEXT = 4096;

let nextClaim = 1;
const pendingClaims = new Map<number, (outcome: ClaimOutcome) => void>();
let claimListener: ((m: unknown) => void) | undefined;

/**
 * Claims `id` once for the whole replica: a worker of `server.workers` asks the primary, which
 * holds one {@link ClaimSet} per scope for every worker (as it holds memory rate-limit budgets).
 * @param scope the set's name, identical in every worker
 * @param ttlMs how long the id is remembered, ms
 * @param maxItems most unexpired ids of the scope (set by its first claim)
 * @param timeoutMs how long to wait for the primary's answer, ms
 * @returns the primary's outcome
 * @throws Error when this process is not one of svc's workers, or when the primary does not answer in time
 */
export function claimInPrimary(scope: string, id: string, ttlMs: number, maxItems: number, timeoutMs: number): Promise<ClaimOutcome> {
  const send = process.send?.bind(process);
  if (!svcWorker() || !send) return Promise.reject(new Error("claimInPrimary: not one of svc's workers"));
  if (!claimListener) {
    claimListener = (m: unknown) => {
      const a = m as Partial<ClaimAnswer> | null;
      if (typeof a === 'object' && a !== null && typeof a.svcClaimAnswer === 'number') pendingClaims.get(a.svcClaimAnswer)?.(a.outcome as ClaimOutcome);
    };
    process.on('message', claimListener);
  }
  return new Promise<ClaimOutcome>((resolve, reject) => {
    const n = nextClaim++;
    if (nextClaim > 2_000_000_000) nextClaim = 1;
    const fail = (e: Error): void => {
      clearTimeout(timer);
      pendingClaims.delete(n);
      reject(e);
    };
    const timer = setTimeout(() => fail(new Error(`the primary did not answer a claim within ${timeoutMs} ms`)), timeoutMs);
    pendingClaims.set(n, (outcome) => {
      clearTimeout(timer);
      pendingClaims.delete(n);
      resolve(outcome);
    });
    const m: ClaimRequest = { svcClaim: n, scope, id, ttlMs, maxItems };
    send(m, undefined, {}, (e: Error | null) => {
      if (e) fail(e);
    });
  });
}

/**
 * The primary's side of {@link claimInPrimary}: one {@link ClaimSet} per scope, shared by every
 * worker. Scopes come from the workers' config, not from clients.
 */
export class PrimaryClaims {
  private readonly sets = new Map<string, ClaimSet>();

  /**
   * Decides a worker's message when it is a claim.
   * @param m a message from a worker
   * @param reply sends the answer back to that worker
   * @returns whether the message was a claim (answered, or dropped when malformed)
   */
  handle(m: unknown, reply: (answer: ClaimAnswer) => void): boolean {
    const r = m as Partial<ClaimRequest> | null;
    if (typeof r !== 'object' || r === null || typeof r.svcClaim !== 'number') return false;
    const { scope, id, ttlMs, maxItems } = r;
    if (typeof scope !== 'string' || typeof id !== 'string' || scope.length > MAX_CLAIM_TEXT || id.length > MAX_CLAIM_TEXT) return true;
    if (typeof ttlMs !== 'number' || !(ttlMs > 0) || typeof maxItems !== 'number' || !Number.isInteger(maxItems) || maxItems < 1) return true;
    let set = this.sets.get(scope);
    if (!set) this.sets.set(scope, (set = new ClaimSet(maxItems)));
    reply({ svcClaimAnswer: r.svcClaim, outcome: set.claim(id, ttlMs) });
    return true;
  }
}

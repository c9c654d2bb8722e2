/**
 * `failsafe[].consensus.misbehaviorsDestination` (eRPC's key, `type: file`): every round in which
 * some upstream was outvoted, or that ended in a dispute, is appended as one JSON line to a file
 * of a directory, in eRPC's record shape (`ts`, `projectId`, `networkId`, `method`, `finality`,
 * `policy`, `request`, `winner`, `analysis`, `participants`).
 *
 * Bounded: a record is at most `maxRecordSize` bytes (participants' responses are cut first, then
 * the request params), this process writes at most `maxTotalSize` bytes to the directory, and at
 * most {@link MAX_PENDING_RECORDS} records wait for the disk; past either bound a record is
 * dropped and counted, never queued without limit. Writes run off the request path, one at a time.
 */
import { createHash } from 'node:crypto';
import { appendFile, mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { type CallContext, FINALITY } from 'svc-proxy/plugin';
import type { Decision, Vote } from './decide.ts';
import type { ConsensusConfig, MisbehaviorsDestination } from './schema.ts';

/** Records waiting for the disk at most; one more is dropped. */
export const MAX_PENDING_RECORDS = 1000;
/** Default `maxRecordSize`, bytes. */
export const DEFAULT_MAX_RECORD_SIZE = 256 * 1024;
/** Default `maxTotalSize`, bytes. */
export const DEFAULT_MAX_TOTAL_SIZE = 256 * 1024 * 1024;
/** eRPC's default file name. */
export const DEFAULT_FILE_PATTERN = '{timestampMs}-{method}-{networkId}';

/** Why a record was not written (the `reason` label of the dropped counter). */
export type DropReason = 'total_size' | 'queue_full' | 'write_error';

/** The process's instance id, as eRPC derives it: INSTANCE_ID, POD_NAME, HOSTNAME, else a hash. */
function instanceId(): string {
  const env = process.env.INSTANCE_ID || process.env.POD_NAME || process.env.HOSTNAME || hostname();
  if (env) return env;
  return createHash('sha256').update(`${Date.now()}-${process.pid}`).digest('hex').slice(0, 16);
}

/** A file-name part safe on every file system: anything but `[A-Za-z0-9._-]` becomes `_`. */
function safe(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 128);
}

/**
 * The file name of a record (eRPC's tokens), `.jsonl` appended unless it ends in a known extension.
 * @param pattern `filePattern`
 * @param at the record's time, epoch ms
 */
export function fileNameOf(pattern: string, at: number, method: string, networkId: string, instance: string): string {
  const iso = new Date(at).toISOString();
  const name = pattern
    .replaceAll('{dateByHour}', `${iso.slice(0, 10)}-${iso.slice(11, 13)}`)
    .replaceAll('{dateByDay}', iso.slice(0, 10))
    .replaceAll('{method}', safe(method))
    .replaceAll('{networkId}', safe(networkId))
    .replaceAll('{instanceId}', safe(instance))
    .replaceAll('{timestampMs}', String(at));
  const flat = safe(name);
  return /\.(jsonl|json|log)$/.test(flat) ? flat : `${flat}.jsonl`;
}

/** A participant's entry of the record. */
interface ParticipantRecord {
  upstreamId: string;
  responseType: string;
  responseHash?: string;
  responseSize: number;
  response?: unknown;
  responseTruncated?: boolean;
  error?: string;
}

function responseTypeOf(v: Vote): string {
  if (v.error) return 'consensusError';
  return v.empty ? 'empty' : 'nonEmpty';
}

/**
 * The JSONL record of a round (eRPC's fields), within `maxRecordSize` bytes.
 * @returns the line (with its newline), or undefined when even the cut record is too large
 */
export function recordOf(
  ctx: CallContext,
  cfg: ConsensusConfig,
  d: Decision,
  votes: readonly Vote[],
  infra: number,
  maxRecordSize: number,
): string | undefined {
  const participants: ParticipantRecord[] = votes.map((v) => ({
    upstreamId: v.upstreamId,
    responseType: responseTypeOf(v),
    responseHash: v.hash,
    responseSize: v.size,
    response: v.result?.result,
    ...(v.error ? { error: v.error.message } : {}),
  }));
  const record = {
    ts: Date.now(),
    projectId: ctx.project.id,
    networkId: ctx.network.id,
    method: ctx.request.method,
    finality: FINALITY.get(ctx),
    policy: {
      maxParticipants: cfg.maxParticipants,
      agreementThreshold: cfg.agreementThreshold,
      disputeBehavior: cfg.disputeBehavior,
      lowParticipantsBehavior: cfg.lowParticipantsBehavior,
      preferNonEmpty: cfg.preferNonEmpty,
      preferLargerResponses: cfg.preferLargerResponses,
      ignoreFields: cfg.ignoreFields ?? null,
    },
    request: { jsonrpc: '2.0', id: null as unknown, method: ctx.request.method, params: ctx.request.params as unknown },
    winner: d.winner
      ? { responseType: responseTypeOf(d.winner), hash: d.winner.hash, size: d.winner.size, upstreamId: d.winner.upstreamId }
      : { responseType: 'error', error: d.error?.message },
    analysis: {
      totalParticipants: votes.length + infra,
      validParticipants: votes.length,
      outcome: d.outcome,
      bestByCount: Math.max(0, ...d.groups.map((g) => g.votes.length)),
      groups: d.groups.map((g) => ({
        hash: g.hash,
        count: g.votes.length,
        isTie: d.groups.filter((o) => o.votes.length === g.votes.length).length > 1,
        responseType: g.isError ? 'consensusError' : g.empty ? 'empty' : 'nonEmpty',
        responseSize: g.size,
      })),
    },
    participants,
  };
  let line = JSON.stringify(record);
  // Too large: cut the participants' responses, largest first, then the params.
  if (Buffer.byteLength(line) > maxRecordSize) {
    for (const p of [...participants].sort((a, b) => b.responseSize - a.responseSize)) {
      if (p.response === undefined) continue;
      delete p.response;
      p.responseTruncated = true;
      line = JSON.stringify(record);
      if (Buffer.byteLength(line) <= maxRecordSize) break;
    }
  }
  if (Buffer.byteLength(line) > maxRecordSize) {
    record.request.params = '(cut: the record exceeded maxRecordSize)';
    line = JSON.stringify(record);
  }
  return Buffer.byteLength(line) + 1 > maxRecordSize ? undefined : `${line}\n`;
}

/** The file writer of one destination, shared by every round that names it. */
export class MisbehaviorExporter {
  private written = 0;
  private pending = 0;
  private chain: Promise<void> = Promise.resolve();
  private ready?: Promise<void>;
  private readonly instance = instanceId();

  /**
   * @param dest the resolved destination (sizes in bytes)
   * @param dropped counts a record not written, by reason
   * @param warn logs a write failure (once per failure)
   * @throws TypeError when `dest.path` is not absolute
   */
  constructor(
    readonly dest: MisbehaviorsDestination,
    private readonly dropped: (reason: DropReason) => void,
    private readonly warn: (msg: string) => void,
  ) {
    if (!isAbsolute(dest.path)) throw new TypeError(`misbehaviorsDestination.path must be absolute, got ${dest.path}`);
  }

  /** Bytes written so far by this process. */
  get bytesWritten(): number {
    return this.written;
  }

  /**
   * Queues one round's record; never throws, never waits.
   * @returns whether the record was queued
   */
  offer(ctx: CallContext, cfg: ConsensusConfig, d: Decision, votes: readonly Vote[], infra: number): boolean {
    const maxRecord = this.dest.maxRecordSize ?? DEFAULT_MAX_RECORD_SIZE;
    const maxTotal = this.dest.maxTotalSize ?? DEFAULT_MAX_TOTAL_SIZE;
    if (this.pending >= MAX_PENDING_RECORDS) {
      this.dropped('queue_full');
      return false;
    }
    const line = recordOf(ctx, cfg, d, votes, infra, maxRecord);
    const size = line === undefined ? 0 : Buffer.byteLength(line);
    if (line === undefined || this.written + size > maxTotal) {
      this.dropped('total_size');
      return false;
    }
    // Counted when queued, so concurrent rounds cannot overshoot the total together.
    this.written += size;
    this.pending++;
    const file = join(this.dest.path, fileNameOf(this.dest.filePattern ?? DEFAULT_FILE_PATTERN, Date.now(), ctx.request.method, ctx.network.id, this.instance));
    this.chain = this.chain.then(async () => {
      try {
        this.ready ??= mkdir(this.dest.path, { recursive: true, mode: 0o750 }).then(() => undefined);
        await this.ready;
        await appendFile(file, line, { mode: 0o640 });
      } catch (e) {
        this.ready = undefined;
        this.dropped('write_error');
        this.warn(`consensus misbehaviorsDestination: cannot write ${file}: ${e instanceof Error ? e.message : String(e)}`);
      } finally {
        this.pending--;
      }
    });
    return true;
  }

  /** Resolves once every queued record was written (or failed): shutdown and tests. */
  flush(): Promise<void> {
    return this.chain;
  }
}

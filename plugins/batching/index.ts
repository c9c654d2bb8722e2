/**
 * batching plugin (spec §2.6, §3.5, §4.7): outbound JSON-RPC batching per
 * upstream. Taps `upstream` at `UpstreamStage.BATCHING` (the innermost wrapper, so timeouts,
 * retries and the breaker see each call as its own attempt) for upstreams with
 * `jsonRpc.supportsBatch: true`: calls wait in a {@link BatchQueue} and go as one POST, matched
 * back by svc's own ids (so calls from different clients with the same id never collide).
 * `jsonRpc.batchMaxSize` and `jsonRpc.batchMaxWait` default to 0 (every call flushes at once);
 * the `configured` hook warns when batching is on with either at 0 (`svc validate` prints it).
 */
import { definePlugin, type Plugin, type PluginHost, type Upstream, type UpstreamCall, type UpstreamSender, UpstreamStage } from 'svc-proxy/plugin';
import { BatchQueue, type QueuedCall } from './queue.ts';

export { BatchQueue, type BatchQueueOptions, type QueuedCall } from './queue.ts';

/** A queued call with the upstream call it stands for (what the sender needs back). */
interface OwnedCall extends QueuedCall {
  readonly owner: UpstreamCall;
}

function ownerOf(c: OwnedCall): UpstreamCall {
  return c.owner;
}

/** An upstream's resolved batching settings. */
export interface BatchSettings {
  supportsBatch: boolean;
  /** Queue length that flushes at once. */
  batchMaxSize: number;
  /** Wait from the first queued call, ms. */
  batchMaxWaitMs: number;
}

/** The batching settings of an upstream (`jsonRpc.*`, resolved and defaulted). */
export function batchSettingsOf(u: Upstream): BatchSettings {
  const j = (u.config.settings.jsonRpc ?? {}) as { supportsBatch?: boolean; batchMaxSize?: number; batchMaxWait?: number };
  return { supportsBatch: j.supportsBatch === true, batchMaxSize: j.batchMaxSize ?? 0, batchMaxWaitMs: j.batchMaxWait ?? 0 };
}

/**
 * Creates the batching plugin (name `batching`).
 * @returns a plugin tapping `upstream` and `configured`; its keys are the core's `jsonRpc.supportsBatch/batchMaxSize/batchMaxWait` (spec §2.6)
 */
export function batchingPlugin(): Plugin {
  return definePlugin({
    name: 'batching',
    apply(host: PluginHost) {
      host.hooks.configured.tap('batching', (config) => {
        config.projects.forEach((p, pi) =>
          p.upstreams.forEach((u, ui) => {
            const j = (u.settings.jsonRpc ?? {}) as { supportsBatch?: boolean; batchMaxSize?: number; batchMaxWait?: number };
            if (j.supportsBatch === true && (!j.batchMaxSize || !j.batchMaxWait)) {
              config.warnings.push(
                `projects[${pi}].upstreams[${ui}].jsonRpc: supportsBatch is on with batchMaxSize ${j.batchMaxSize ?? 0} and batchMaxWait ${j.batchMaxWait ?? 0} ms; 0 sends every call at once (set both non-zero, docs/interface.md §2.6)`,
              );
            }
          }),
        );
      });
      host.hooks.upstream.tap({ name: 'batching', stage: UpstreamStage.BATCHING }, (inner: UpstreamSender, u: Upstream): UpstreamSender => {
        const s = batchSettingsOf(u);
        if (!s.supportsBatch) return inner;
        const queue = new BatchQueue<OwnedCall>({
          maxSize: s.batchMaxSize,
          maxWaitMs: s.batchMaxWaitMs,
          send: (calls) => u.sendBatch(calls.map(ownerOf)),
          // svc rewrites ids on the way out, so clients' ids never collide in a batch: the queue is keyed by svc's own sequence
          // (its duplicate-id flush, §3.5, never fires here and is not checked).
          uniqueIds: true,
        });
        let seq = 0;
        return (call: UpstreamCall) => {
          // Headers of one caller (forwarded client headers) must not ride on other callers' calls.
          if (call.headers) return inner(call);
          return queue.add({ id: String(++seq), method: call.method, params: call.params, deadline: call.ctx.deadline, signal: call.signal, owner: call });
        };
      });
    },
  });
}

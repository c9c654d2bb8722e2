/**
 * One WebSocket message in, one answer out: a call or a batch goes whole through the same pipeline
 * as an HTTP POST (`host.serveJsonRpc`), except `eth_subscribe` / `eth_unsubscribe`, which the
 * subscription hub answers. A batch holding some is split: the subscription elements go to the
 * hub, the rest as one sub-batch through the pipeline, and the answers are put back in the
 * batch's order, each with its caller's id byte for byte.
 */
import type { JsonRpcOutput } from 'svc-proxy/plugin';
import { arrayElements } from 'svc-proxy/util';

/** Methods the subscription hub answers. */
export const SUBSCRIPTION_METHODS: ReadonlySet<string> = new Set(['eth_subscribe', 'eth_unsubscribe']);

/** Cheap test first: a message that cannot name either method goes straight to the pipeline, unparsed. */
const MENTIONS_SUBSCRIPTION = /eth_(?:un)?subscribe/;

/** What answering a message needs from its connection. */
export interface MessageHandlers {
  /** Serves a body (a call or a batch) through the pipeline; never rejects. */
  serve(body: string): Promise<JsonRpcOutput>;
  /**
   * Answers one subscription call; never rejects.
   * @param elementText the call's raw JSON text (its id is read from it, byte for byte)
   * @param call the parsed call (its `method` is one of {@link SUBSCRIPTION_METHODS})
   * @returns the JSON-RPC answer object's text
   */
  subscription(elementText: string, call: Readonly<Record<string, unknown>>): Promise<string>;
  /** `server.maxBatchSize`: a larger batch goes whole to the pipeline, which refuses it. */
  maxBatchSize: number;
  /** `server.maxJsonDepth`: a deeper subscription call goes to the pipeline, which refuses it. */
  maxJsonDepth: number;
}

/** Whether a parsed element is a subscription call (an object whose `method` the hub answers). */
export function isSubscriptionCall(el: unknown): el is Record<string, unknown> {
  if (el === null || typeof el !== 'object' || Array.isArray(el)) return false;
  const m = (el as { method?: unknown }).method;
  return typeof m === 'string' && SUBSCRIPTION_METHODS.has(m);
}

/**
 * The answer to one message.
 * @param text the message's UTF-8 text (at most `server.maxBodySize` bytes: the socket's `maxPayload`)
 * @param h the connection's handlers
 * @returns the answer's text: one object, or an array for a batch
 */
export async function answerMessage(text: string, h: MessageHandlers): Promise<string> {
  const whole = async () => (await h.serve(text)).body;
  if (!MENTIONS_SUBSCRIPTION.test(text)) return whole();
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    // The pipeline answers the parse error as it does on HTTP.
    return whole();
  }
  const batch = Array.isArray(doc);
  const calls: unknown[] = batch ? (doc as unknown[]) : [doc];
  if (calls.length === 0 || calls.length > h.maxBatchSize || !calls.some(isSubscriptionCall)) return whole();
  // Raw element texts (ids byte for byte) and depths, in one linear pass.
  const elements = arrayElements(batch ? text : `[${text}]`);
  if (elements.length !== calls.length) return whole();
  const toHub = calls.map((c, i) => isSubscriptionCall(c) && (elements[i]?.depth ?? Infinity) <= h.maxJsonDepth);
  if (!batch) return toHub[0] ? h.subscription(elements[0]!.text, calls[0] as Record<string, unknown>) : whole();
  const rest = elements.filter((_, i) => !toHub[i]);
  const restAnswers: Promise<string[]> =
    rest.length === 0
      ? Promise.resolve([])
      : h.serve(`[${rest.map((e) => e.text).join(',')}]`).then((out) =>
          // A sub-batch refused as a whole may still come back as one object: each element gets it.
          out.batch ? arrayElements(out.body).map((e) => e.text) : rest.map(() => out.body),
        );
  const hubAnswers = calls.map((c, i) => (toHub[i] ? h.subscription(elements[i]!.text, c as Record<string, unknown>) : undefined));
  const served = await restAnswers;
  const out: string[] = [];
  let r = 0;
  for (const a of hubAnswers) out.push(a !== undefined ? await a : (served[r++] ?? 'null'));
  return `[${out.join(',')}]`;
}

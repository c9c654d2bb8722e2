/**
 * `eth_getLogs` checks (intrinsic level, spec §2.8 #10): every log inside the requested block
 * range (numeric bounds only: a tag names a block the answer cannot prove) or in the requested
 * block hash, matching the filter's address and topics, one hash per block number, and no
 * duplicate (blockHash, logIndex).
 */
import type { Anchors } from '../anchors.ts';
import { CheckFailure, isHex, isObject, needData, needQuantity, quantityOf, sameHex, short, type JsonObject, NO_SKIP, type SkipChecks } from '../hex.ts';

/** A compiled `eth_getLogs` filter. */
interface LogFilter {
  from?: bigint;
  to?: bigint;
  blockHash?: string;
  /** Lower-case addresses; undefined = any. */
  addresses?: ReadonlySet<string>;
  /** Per position: undefined = any, else the lower-case topics allowed. */
  topics: Array<ReadonlySet<string> | undefined>;
}

function lowerSet(v: unknown, what: string): ReadonlySet<string> | undefined {
  if (v === null || v === undefined) return undefined;
  const list = Array.isArray(v) ? v : [v];
  // An empty list matches anything (geth's reading of `[]`).
  if (list.length === 0) return undefined;
  const out = new Set<string>();
  for (const x of list) {
    if (typeof x !== 'string') throw new CheckFailure('logs.filter', `the request's ${what} filter holds a non-string`);
    out.add(x.toLowerCase());
  }
  return out;
}

/**
 * Compiles the filter of an `eth_getLogs` request.
 * @param filter `params[0]`
 * @throws CheckFailure (`logs.filter`) for a filter whose address or topics are not strings
 */
export function compileLogFilter(filter: unknown): LogFilter {
  const f = isObject(filter) ? filter : {};
  const out: LogFilter = { topics: [] };
  if (isHex(f.blockHash)) out.blockHash = f.blockHash.toLowerCase();
  else {
    const from = quantityOf(f.fromBlock);
    const to = quantityOf(f.toBlock);
    if (from !== undefined) out.from = from;
    if (to !== undefined) out.to = to;
  }
  out.addresses = lowerSet(f.address, 'address');
  if (Array.isArray(f.topics)) out.topics = f.topics.map((t, i) => lowerSet(t, `topics[${i}]`));
  return out;
}

/**
 * Checks an `eth_getLogs` answer and records the blocks it rests on in `anchors`.
 * @param params the request params (`[filter]`)
 * @param logs the answer (a non-empty array)
 * @param anchors where each block and its logs are recorded
 * @throws CheckFailure: `logs.range`, `logs.address`, `logs.topics`, `logs.block` (two hashes for
 *   one number), `logs.duplicate`, `logs.shape`
 */
export function checkLogsAnswer(params: unknown, logs: unknown, anchors: Anchors, skip: SkipChecks = NO_SKIP): void {
  if (!Array.isArray(logs)) throw new CheckFailure('logs.shape', 'the answer is not an array of logs');
  const p = Array.isArray(params) ? params : [];
  // getLogsFilterSanity off: the answer is not held to the request's range, addresses or topics.
  const f = skip.has('logs.filter') ? compileLogFilter(undefined) : compileLogFilter(p[0]);
  const seen = new Set<string>();
  for (const l of logs) {
    if (!isObject(l)) throw new CheckFailure('logs.shape', 'a log is not an object');
    const n = needQuantity(l, 'blockNumber', 'logs.shape');
    const hash = needData(l, 'blockHash', 'logs.shape');
    const li = needQuantity(l, 'logIndex', 'logs.shape');
    const where = `log ${li} of block ${n}`;
    if (f.blockHash !== undefined && !sameHex(hash, f.blockHash))
      throw new CheckFailure('logs.range', `${where} is in block ${hash}, the request asked for ${f.blockHash}`);
    if (f.from !== undefined && n < f.from) throw new CheckFailure('logs.range', `${where} is before fromBlock ${f.from}`);
    if (f.to !== undefined && n > f.to) throw new CheckFailure('logs.range', `${where} is after toBlock ${f.to}`);
    if (typeof l.address !== 'string') throw new CheckFailure('logs.shape', `${where} has no address`);
    if (f.addresses && !f.addresses.has(l.address.toLowerCase()))
      throw new CheckFailure('logs.address', `${where} is from ${l.address}, not an address of the filter`);
    const topics = Array.isArray(l.topics) ? l.topics : undefined;
    if (!topics) throw new CheckFailure('logs.shape', `${where} has no topics array`);
    for (let i = 0; i < f.topics.length; i++) {
      const allowed = f.topics[i];
      if (!allowed) continue;
      const t = topics[i];
      if (typeof t !== 'string' || !allowed.has(t.toLowerCase()))
        throw new CheckFailure('logs.topics', `${where} topic ${i} ${short(t)} does not match the filter`);
    }
    const key = `${hash.toLowerCase()}:${li}`;
    if (seen.has(key)) throw new CheckFailure('logs.duplicate', `${where} (${hash}) appears twice`);
    seen.add(key);
    anchors.add(n, hash, 'logs.block', [l as JsonObject]);
  }
}

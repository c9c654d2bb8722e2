/**
 * One parse, one truth (spec §4.2): whatever svc sends upstream is exactly what the cache and
 * multiplexing keys hash. A member given twice is refused with -32600 naming it; a large params
 * value is forwarded as the client's own bytes only when those bytes say what the parsed value
 * says (no duplicate names, every number reproduced exactly).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { isLosslessNumber, parse as losslessParse } from 'lossless-json';
import stringify from 'safe-stable-stringify';
import { parseRequestBody, rawParamsOf, RAW_PARAMS_MIN_BYTES } from '../../../core/wire/jsonrpc.ts';
import { paramsHash } from 'svc-proxy/plugins/multiplex';
import { scanMembers } from '../../../lib/json-scan.ts';

/** The params bytes svc's transport sends for a call (core/registry/transport.ts `body`). */
function sentParams(params: unknown): string {
  const raw = rawParamsOf(params);
  return raw ? raw.toString('utf8') : JSON.stringify(params);
}

/** Key-sorted text of a lossless parse: numbers kept as their exact text, as an upstream reads them. */
function losslessCanonical(v: unknown): string {
  if (isLosslessNumber(v)) return v.value;
  if (Array.isArray(v)) return `[${v.map(losslessCanonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${losslessCanonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * Test oracle, independent of svc's scanner: true when some object of a JSON value repeats a
 * member name (decoded). A plain recursive descent; test inputs are small and shallow.
 */
function hasDuplicateName(text: string): boolean {
  let i = 0;
  const ws = () => {
    while (/\s/.test(text[i] ?? '')) i++;
  };
  const str = (): string => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (): boolean => {
    ws();
    const c = text[i];
    if (c === '"') return (str(), false);
    if (c === '[' || c === '{') {
      const obj = c === '{';
      const names = new Set<string>();
      let dup = false;
      i++;
      ws();
      if (text[i] === (obj ? '}' : ']')) return (i++, false);
      for (;;) {
        ws();
        if (obj) {
          const k = str();
          if (names.has(k)) dup = true;
          names.add(k);
          ws();
          i++; // :
        }
        if (value()) dup = true;
        ws();
        if (text[i++] !== ',') return dup;
      }
    }
    while (i < text.length && !/[,\]}\s]/.test(text[i]!)) i++;
    return false;
  };
  return value();
}

// ---- generators: JSON text with the oddities clients send --------------------------------
const ws = fc.constantFrom('', ' ', '\n', '\t', ' \r\n  ');
const name = fc.constantFrom('to', 'from', 'data', 'value', 'params', 'id', 'method', 'a', 'é', 'gas');
/** A string literal, sometimes with its characters written as \u escapes. */
const stringLit = fc
  .tuple(fc.string({ maxLength: 8 }), fc.boolean())
  .map(([s, escape]) => (escape ? `"${[...s].map((ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(s)));
const keyLit = fc
  .tuple(name, fc.boolean())
  .map(([k, escape]) => (escape ? `"${[...k].map((ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(k)));
const numberLit = fc.oneof(
  fc.integer().map(String),
  fc.constantFrom('1.0', '1e3', '-0', '0.1', '12345678901234567891', '9007199254740993', '1E+2', '-1.50'),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
);
const leaf = fc.oneof(stringLit, numberLit, fc.constantFrom('true', 'false', 'null'));
const tree = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.tuple(fc.array(tie('value'), { maxLength: 4 }), ws).map(([xs, w]) => `[${w}${xs.join(`${w},${w}`)}${w}]`),
    fc
      .tuple(fc.array(fc.tuple(keyLit, tie('value')), { maxLength: 4 }), ws)
      .map(([ms, w]) => `{${w}${ms.map(([k, v]) => `${k}${w}:${w}${v}`).join(`,${w}`)}${w}}`),
  ),
})).value;
/** Params text: a list, sometimes padded past the raw-forwarding threshold with a large string. */
const paramsText = fc.tuple(fc.array(tree, { maxLength: 3 }), fc.boolean(), ws).map(([xs, big, w]) => {
  const items = big ? [...xs, `"0x${'ab'.repeat(RAW_PARAMS_MIN_BYTES / 2 + 8)}"`] : xs;
  return `[${w}${items.join(`,${w}`)}${w}]`;
});
/** A request object text, sometimes with `params`, `method` or `id` given twice. */
const body = fc.tuple(paramsText, paramsText, fc.constantFrom('none', 'params', 'method', 'id'), ws).map(([p1, p2, dup, w]) => {
  const members = [`"jsonrpc":"2.0"`, `"id":7`, `"method":"eth_call"`, `"params":${w}${p1}`];
  if (dup === 'params') members.push(`"params":${p2}`);
  if (dup === 'method') members.push(`"method":"eth_getBalance"`);
  if (dup === 'id') members.push(`"id":8`);
  return `{${w}${members.join(`,${w}`)}${w}}`;
});

describe('one parse, one truth (spec §4.2)', () => {
  it('property: what svc sends upstream is exactly what it keyed, or the call is refused naming a duplicate', () => {
    fc.assert(
      fc.property(body, (text) => {
        const parsed = parseRequestBody(text, { maxDepth: 64 }, Buffer.from(text, 'utf8'));
        const call = parsed.calls[0]!;
        if (hasDuplicateName(text)) {
          expect(call.invalid?.code, text.slice(0, 200)).to.equal(-32600);
          expect(call.invalid?.message).to.match(/member ".*" appears twice/);
          return;
        }
        expect(call.invalid, text.slice(0, 200)).to.equal(undefined);
        const sent = sentParams(call.params);
        // The key hashes the parsed params (safe-stable-stringify); the upstream reads the sent bytes.
        const keyed = stringify(call.params) as string;
        expect(losslessCanonical(losslessParse(sent)), text.slice(0, 200)).to.equal(keyed);
        expect(paramsHash(JSON.parse(sent))).to.equal(paramsHash(call.params));
      }),
      { numRuns: 400 },
    );
  });

  it('a body with params A then params B (raw-forwarding size) is refused with -32600 naming "params"', () => {
    const a = `["0x${'aa'.repeat(RAW_PARAMS_MIN_BYTES)}","latest"]`;
    const b = `["0x${'bb'.repeat(RAW_PARAMS_MIN_BYTES)}","latest"]`;
    const text = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":${a},"params":${b}}`;
    const call = parseRequestBody(text, { maxDepth: 64 }, Buffer.from(text)).calls[0]!;
    expect(call.invalid?.code).to.equal(-32600);
    expect(call.invalid?.message).to.equal('invalid request: member "params" appears twice');
    expect(call.params).to.equal(undefined);
  });

  it('in a batch only the element with a duplicate is refused; "method" and "id" twice are named too', () => {
    const text = `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"},{"jsonrpc":"2.0","id":3,"id":4,"method":"eth_chainId"}]`;
    const { calls } = parseRequestBody(text);
    expect(calls[0]!.invalid?.message).to.equal('invalid request: member "method" appears twice');
    expect(calls[0]!.idRaw).to.equal('1');
    expect(calls[1]!.invalid).to.equal(undefined);
    expect(calls[1]!.method).to.equal('eth_chainId');
    expect(calls[2]!.invalid?.message).to.equal('invalid request: member "id" appears twice');
    expect(calls[2]!.idRaw).to.equal('null');
  });

  it('a name written once plainly and once with \\u escapes is the same name', () => {
    const text = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[1],"par\\u0061ms":[2]}`;
    expect(parseRequestBody(text).calls[0]!.invalid?.message).to.equal('invalid request: member "params" appears twice');
  });

  it('a duplicate inside params is refused too, and a long name is cut in the message', () => {
    const long = 'k'.repeat(500);
    const text = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x1","${long}":1,"${long}":2}]}`;
    const msg = parseRequestBody(text).calls[0]!.invalid?.message ?? '';
    expect(msg).to.match(/appears twice in one object of the request$/);
    expect(msg.length).to.be.below(200);
  });

  it('large params whose numbers a parse would change are re-serialised from the parsed value', () => {
    const big = `"0x${'ab'.repeat(RAW_PARAMS_MIN_BYTES)}"`;
    const exact = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[${big},12]}`;
    const lossy = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[${big},12345678901234567891]}`;
    expect(rawParamsOf(parseRequestBody(exact, undefined, Buffer.from(exact)).calls[0]!.params)).to.not.equal(undefined);
    expect(rawParamsOf(parseRequestBody(lossy, undefined, Buffer.from(lossy)).calls[0]!.params)).to.equal(undefined);
  });

  it('scanMembers: one pass, objects inside arrays and strings holding braces', () => {
    expect(scanMembers('{"a":[{"b":1},{"b":2}],"c":"{\\"a\\":1}"}')).to.deep.equal({ lossyNumber: false });
    expect(scanMembers('{"a":[{"b":1,"b":2}]}')).to.deep.equal({ duplicate: 'b', topLevel: false, lossyNumber: false });
    expect(scanMembers('{"a":1.0}').lossyNumber).to.equal(true);
  });
});

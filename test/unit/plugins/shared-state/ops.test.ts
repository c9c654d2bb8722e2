/**
 * shared-state operator-change log (plugins/shared-state/ops.ts): the entry a replica appends for
 * a broadcast, what it accepts of what it reads (malformed or oversized entries dropped, the read
 * position still moving past them), and the bounded outbox kept while Redis is unreachable.
 */
import { expect } from 'chai';
import { entriesOfReply, MAX_OP_PAYLOAD_BYTES, opFields, OpsOutbox, parseOpEntry } from '../../../../plugins/shared-state/index.ts';

const params = { method: 'svc_cordonUpstream', params: [{ projectId: 'main', upstream: 'a' }] };

describe('shared-state operator-change log', () => {
  it('an entry carries the replica, the topic and the payload as JSON, and reads back the same', () => {
    const f = opFields('r1', 'admin', params);
    expect(f).to.deep.equal({ replica: 'r1', topic: 'admin', payload: JSON.stringify(params) });
    expect(parseOpEntry('1700000000000-0', f)).to.deep.equal({ id: '1700000000000-0', replica: 'r1', topic: 'admin', payload: params });
  });

  it('a payload that is not JSON or is over the bound is not shared', () => {
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    expect(opFields('r1', 'admin', loop)).to.equal(undefined);
    expect(opFields('r1', 'admin', undefined)).to.equal(undefined);
    expect(opFields('r1', 'admin', 'x'.repeat(MAX_OP_PAYLOAD_BYTES))).to.equal(undefined);
    expect(opFields('r1', 't'.repeat(200), 1)).to.equal(undefined);
  });

  it('drops malformed entries: bad id, missing or non-string fields, bad JSON, oversized fields', () => {
    const ok = { replica: 'r1', topic: 'admin', payload: '{}' };
    expect(parseOpEntry('1-0', ok)).to.not.equal(undefined);
    expect(parseOpEntry('x', ok)).to.equal(undefined);
    expect(parseOpEntry(5, ok)).to.equal(undefined);
    expect(parseOpEntry('1-0', null)).to.equal(undefined);
    expect(parseOpEntry('1-0', { ...ok, replica: 3 })).to.equal(undefined);
    expect(parseOpEntry('1-0', { ...ok, topic: '' })).to.equal(undefined);
    expect(parseOpEntry('1-0', { ...ok, payload: '{' })).to.equal(undefined);
    expect(parseOpEntry('1-0', { ...ok, payload: `"${'x'.repeat(MAX_OP_PAYLOAD_BYTES)}"` })).to.equal(undefined);
    expect(parseOpEntry('1-0', { ...ok, replica: 'r'.repeat(200) })).to.equal(undefined);
  });

  it('an XREAD reply: entries in order, malformed ones as undefined, the last id moves past them', () => {
    const reply = [
      {
        name: 'svc:ops',
        messages: [
          { id: '10-0', message: { replica: 'r1', topic: 'admin', payload: '1' } },
          { id: '11-0', message: { replica: 'r2', topic: 'admin', payload: 'not json' } },
          { id: '12-0', message: { replica: 'r2', topic: 'admin', payload: '2' } },
          { id: '13-0', message: { junk: 'x' } },
        ],
      },
    ];
    const { entries, lastId } = entriesOfReply(reply);
    expect(entries.map((e) => e?.payload)).to.deep.equal([1, undefined, 2, undefined]);
    expect(lastId).to.equal('13-0');
    expect(entriesOfReply(null)).to.deep.equal({ entries: [], lastId: undefined });
    expect(entriesOfReply([{ name: 'x', messages: 'no' }, null])).to.deep.equal({ entries: [], lastId: undefined });
  });

  it('the outbox keeps order and drops the oldest past its bound, counting them once', () => {
    const box = new OpsOutbox(3);
    for (let i = 1; i <= 5; i++) box.push({ replica: 'r', topic: 't', payload: String(i) });
    expect(box.size).to.equal(3);
    expect(box.takeDropped()).to.equal(2);
    expect(box.takeDropped()).to.equal(0);
    const out: string[] = [];
    for (let f = box.peek(); f; f = box.peek()) {
      out.push(f.payload);
      box.shift();
    }
    expect(out).to.deep.equal(['3', '4', '5']);
  });
});

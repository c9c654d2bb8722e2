/**
 * The operator page's Server-Sent Events hub (plugins/admin/ui/stream.ts): one snapshot per tick
 * for every open stream, the `maxStreams` bound, slow clients dropped, streams ended when svc
 * leaves `serving` and on closeAll (the `closing` hook), and a failing snapshot that leaves the
 * streams open.
 */
import { expect } from 'chai';
import type { PassThrough } from 'node:stream';
import { EventStreams, MAX_BUFFERED_BYTES } from '../../../../plugins/admin/ui/stream.ts';

/** Everything written to a stream so far. */
function collect(s: PassThrough): { text: () => string; ended: Promise<void> } {
  let text = '';
  s.on('data', (c: Buffer) => (text += c.toString()));
  const ended = new Promise<void>((resolve) => s.once('close', () => resolve()));
  return { text: () => text, ended };
}

const snapshots = (t: string) => t.match(/event: snapshot\ndata: .*\n\n/g) ?? [];
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('admin ui: event streams (plugins/admin/ui/stream.ts)', () => {
  let hub: EventStreams | undefined;
  afterEach(() => hub?.closeAll());

  it('writes retry, then a snapshot at once and one per interval, built once per tick for every stream', async () => {
    let built = 0;
    hub = new EventStreams({
      maxStreams: 4,
      intervalMs: 30,
      produce: () => Promise.resolve(JSON.stringify({ n: ++built })),
      serving: () => true,
      onError: () => undefined,
    });
    const a = collect(hub.add(() => 0) as PassThrough);
    const b = collect(hub.add(() => 0) as PassThrough);
    await tick(100);
    expect(a.text().startsWith('retry: 1000\n\n')).to.equal(true);
    expect(snapshots(a.text()).length).to.be.at.least(3);
    // Two immediate first events (one per stream), then one build per tick shared by both.
    expect(built).to.be.at.most(snapshots(a.text()).length + 1);
    expect(snapshots(b.text()).length).to.be.at.least(3);
  });

  it('refuses a stream beyond maxStreams and frees its place when a client goes away', async () => {
    hub = new EventStreams({ maxStreams: 1, intervalMs: 1000, produce: () => Promise.resolve('{}'), serving: () => true, onError: () => undefined });
    const first = hub.add(() => 0) as PassThrough;
    expect(first).to.not.equal(undefined);
    expect(hub.add(() => 0)).to.equal(undefined);
    first.destroy();
    await tick(5);
    expect(hub.size).to.equal(0);
    expect(hub.add(() => 0)).to.not.equal(undefined);
  });

  it('drops a client that does not read (more than MAX_BUFFERED_BYTES waiting)', async () => {
    hub = new EventStreams({ maxStreams: 2, intervalMs: 20, produce: () => Promise.resolve('{}'), serving: () => true, onError: () => undefined });
    let pending = 0;
    const slow = collect(hub.add(() => pending) as PassThrough);
    await tick(30);
    pending = MAX_BUFFERED_BYTES + 1;
    await slow.ended;
    expect(hub.size).to.equal(0);
  });

  it('ends every stream once svc leaves serving, and refuses new ones', async () => {
    let serving = true;
    hub = new EventStreams({ maxStreams: 2, intervalMs: 20, produce: () => Promise.resolve('{}'), serving: () => serving, onError: () => undefined });
    const s = collect(hub.add(() => 0) as PassThrough);
    serving = false;
    await s.ended;
    expect(hub.add(() => 0)).to.equal(undefined);
  });

  it('closeAll ends every stream at once and refuses new ones', async () => {
    hub = new EventStreams({ maxStreams: 2, intervalMs: 10_000, produce: () => Promise.resolve('{}'), serving: () => true, onError: () => undefined });
    const a = collect(hub.add(() => 0) as PassThrough);
    const b = collect(hub.add(() => 0) as PassThrough);
    hub.closeAll();
    await Promise.all([a.ended, b.ended]);
    expect(hub.add(() => 0)).to.equal(undefined);
  });

  it('a failing snapshot is reported and the stream stays open for the next tick', async () => {
    let fail = true;
    const errors: unknown[] = [];
    hub = new EventStreams({
      maxStreams: 1,
      intervalMs: 20,
      produce: () => (fail ? Promise.reject(new Error('registry')) : Promise.resolve('{"ok":1}')),
      serving: () => true,
      onError: (e) => errors.push(e),
    });
    const s = collect(hub.add(() => 0) as PassThrough);
    await tick(30);
    expect(errors.length).to.be.at.least(1);
    fail = false;
    await tick(50);
    expect(s.text()).to.include('data: {"ok":1}');
  });
});

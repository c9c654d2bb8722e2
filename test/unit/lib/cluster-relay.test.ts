/**
 * The fleet relay of lib/cluster.ts (docs/operations.md "Fleet: shared state"): a registered relay
 * sees every broadcast of this process (here a single-process svc, where the worker broadcast
 * alone is a no-op); what it delivers from another replica reaches this process's receivers of
 * the topic only, never a relay again (no echo); failures of a relay or a receiver stay theirs.
 */
import { expect } from 'chai';
import {
  broadcastToWorkers,
  fleetReplicaId,
  onWorkerBroadcast,
  registerFleetRelay,
  SVC_REPLICA_ENV,
  SVC_WORKER_ENV,
  workerEnv,
  type FleetRelayRegistration,
} from '../../../lib/cluster.ts';

describe('lib/cluster: fleet relay', () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });
  const relay = (forward: (topic: string, payload: unknown) => void): FleetRelayRegistration => {
    const r = registerFleetRelay({ forward });
    cleanups.push(() => r.remove());
    return r;
  };
  const subscribe = (topic: string, receive: (payload: unknown) => void): void => {
    cleanups.push(onWorkerBroadcast(topic, receive));
  };

  it('forwards every broadcast of this process to the relay, also outside svc workers', () => {
    const seen: Array<[string, unknown]> = [];
    relay((t, p) => seen.push([t, p]));
    broadcastToWorkers('admin', { method: 'svc_cordonUpstream', params: [{ projectId: 'main', upstream: 'a' }] });
    broadcastToWorkers('other', 1);
    expect(seen).to.deep.equal([
      ['admin', { method: 'svc_cordonUpstream', params: [{ projectId: 'main', upstream: 'a' }] }],
      ['other', 1],
    ]);
  });

  it("a broadcast does not reach this process's own receivers (they made it)", () => {
    const got: unknown[] = [];
    subscribe('admin', (p) => got.push(p));
    broadcastToWorkers('admin', 'x');
    expect(got).to.deep.equal([]);
  });

  it('deliver reaches the receivers of that topic only, and never a relay (no echo)', () => {
    const forwarded: unknown[] = [];
    const r = relay((_t, p) => forwarded.push(p));
    const admin: unknown[] = [];
    const other: unknown[] = [];
    subscribe('admin', (p) => admin.push(p));
    subscribe('admin', (p) => admin.push(['second', p]));
    subscribe('other', (p) => other.push(p));
    r.deliver('admin', { n: 1 });
    expect(admin).to.deep.equal([{ n: 1 }, ['second', { n: 1 }]]);
    expect(other).to.deep.equal([]);
    expect(forwarded).to.deep.equal([]);
  });

  it('a receiver that throws does not stop the others; a relay that throws does not reach the broadcaster', () => {
    const r = relay(() => {
      throw new Error('relay down');
    });
    const got: unknown[] = [];
    subscribe('admin', () => {
      throw new Error('bad receiver');
    });
    subscribe('admin', (p) => got.push(p));
    expect(() => r.deliver('admin', 7)).to.not.throw();
    expect(got).to.deep.equal([7]);
    expect(() => broadcastToWorkers('admin', 8)).to.not.throw();
  });

  it('unsubscribe and remove stop delivery and forwarding', () => {
    const forwarded: unknown[] = [];
    const r = registerFleetRelay({ forward: (_t, p) => forwarded.push(p) });
    const got: unknown[] = [];
    const off = onWorkerBroadcast('admin', (p) => got.push(p));
    r.deliver('admin', 1);
    off();
    off();
    r.deliver('admin', 2);
    broadcastToWorkers('admin', 3);
    r.remove();
    r.remove();
    broadcastToWorkers('admin', 4);
    expect(got).to.deep.equal([1]);
    expect(forwarded).to.deep.equal([3]);
  });

  it('one replica id per process, handed to the workers the primary forks', () => {
    const id = fleetReplicaId();
    expect(id).to.match(/^[0-9a-f-]{36}$/);
    expect(fleetReplicaId()).to.equal(id);
    expect(workerEnv(2, 4)).to.deep.equal({ [SVC_WORKER_ENV]: '2/4', [SVC_REPLICA_ENV]: id });
  });
});

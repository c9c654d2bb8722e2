/**
 * How `svc start` stops (spec §3.2, bin/signals.ts): an orchestrator's SIGTERM always drains; Ctrl-C from a person at a terminal stops
 * at once when nothing is in flight, and drains otherwise.
 */
import { expect } from 'chai';
import { stopsAtOnce } from '../../bin/signals.ts';

describe('svc start: which stop signal drains and which stops at once (spec §3.2)', () => {
  it('SIGTERM always drains, at a terminal or not, busy or idle', () => {
    for (const atTerminal of [true, false]) for (const inFlight of [0, 3]) expect(stopsAtOnce('SIGTERM', atTerminal, inFlight)).to.equal(false);
  });

  it('Ctrl-C at a terminal with nothing in flight stops at once; with requests in flight it drains', () => {
    expect(stopsAtOnce('SIGINT', true, 0)).to.equal(true);
    expect(stopsAtOnce('SIGINT', true, 1)).to.equal(false);
  });

  it('SIGINT without a terminal (a process manager, a container) drains like SIGTERM', () => {
    expect(stopsAtOnce('SIGINT', false, 0)).to.equal(false);
  });
});

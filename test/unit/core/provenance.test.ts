/**
 * The provenance rule the cache and multiplexing share (spec §2.8): '' for a call answered under
 * the network's own rules, a stable key naming whatever changed it otherwise.
 */
import { expect } from 'chai';
import type { CallContext, Directives } from '../../../core/context.ts';
import { markProvenance, MAX_PROVENANCE_MARK, provenanceKey } from '../../../core/provenance.ts';

function ctxOf(directives: Directives, defaults: Directives = {}): CallContext {
  return { directives, network: { config: { directiveDefaults: defaults } } } as unknown as CallContext;
}

describe('provenance: one rule for the cache and multiplexing (spec §2.8)', () => {
  it('a call under the network rules has an empty key', () => {
    expect(provenanceKey(ctxOf({}))).to.equal('');
    expect(provenanceKey(ctxOf({ useUpstream: '', skipConsensus: false, skipCacheRead: 'true', retryEmpty: true }))).to.equal('');
  });

  it('use-upstream and skip-consensus change it, unless they are the network default', () => {
    expect(provenanceKey(ctxOf({ useUpstream: 'b' }))).to.equal('\0use-upstream=b');
    expect(provenanceKey(ctxOf({ skipConsensus: true }))).to.equal('\0skip-consensus');
    expect(provenanceKey(ctxOf({ useUpstream: 'b' }, { useUpstream: 'b' }))).to.equal('');
    expect(provenanceKey(ctxOf({ skipConsensus: true }, { skipConsensus: true }))).to.equal('');
    expect(provenanceKey(ctxOf({ useUpstream: 'a' }))).to.not.equal(provenanceKey(ctxOf({ useUpstream: 'b' })));
  });

  it('a plugin mark changes it, bounded in size', () => {
    const ctx = ctxOf({});
    markProvenance(ctx, 'integrity', 'off');
    expect(provenanceKey(ctx)).to.equal('\0integrity=off');
    const long = ctxOf({ useUpstream: 'x'.repeat(5000) });
    markProvenance(long, 'pricing', 'y'.repeat(5000));
    expect(provenanceKey(long).length).to.be.at.most(2 * MAX_PROVENANCE_MARK + 40);
  });
});

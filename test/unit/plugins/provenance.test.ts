/**
 * The provenance rule the cache and multiplexing share (spec §2.8): '' for a call answered under
 * the network's own rules, a stable key naming whatever changed it otherwise. The core knows no
 * directive: the plugin honouring one marks the call (select for `use-upstream`, consensus for
 * `skip-consensus`, at `DirectiveStage.PROVENANCE`), the key is the marks in order.
 */
import { expect } from 'chai';
import { Registry } from 'prom-client';
import type { CallContext, Directives } from '../../../core/pipeline/context.ts';
import { createHooks } from '../../../core/pipeline/hooks.ts';
import { Services, type PluginHost } from '../../../core/host/host.ts';
import { markProvenance, MAX_PROVENANCE_MARK, provenanceKey } from 'svc-proxy/plugins/multiplex';
import { consensusPlugin } from '../../../plugins/consensus/index.ts';
import { selectPlugin } from '../../../plugins/select/index.ts';

function ctxOf(directives: Directives, defaults: Directives = {}): CallContext {
  return { directives, network: { config: { directiveDefaults: defaults } }, state: new Map() } as unknown as CallContext;
}

/** The `directives` hook with only the select and consensus plugins' taps (no directives plugin: `d` is given as resolved). */
function markingHook(): (d: Directives, defaults?: Directives) => string {
  const hooks = createHooks();
  const host = { hooks, services: new Services(), metrics: new Registry() } as unknown as PluginHost;
  selectPlugin().apply(host);
  consensusPlugin().apply(host);
  return (d, defaults = {}) => {
    const ctx = ctxOf(d, defaults);
    hooks.directives.call(d, ctx);
    return provenanceKey(ctx);
  };
}

describe('provenance: one rule for the cache and multiplexing (spec §2.8)', () => {
  it('a call no plugin marked has an empty key', () => {
    expect(provenanceKey(ctxOf({}))).to.equal('');
    const mark = markingHook();
    expect(mark({})).to.equal('');
    expect(mark({ useUpstream: '', skipConsensus: false, skipCacheRead: 'true', retryEmpty: true })).to.equal('');
  });

  it('use-upstream (select) and skip-consensus (consensus) mark it, unless they are the network default', () => {
    const mark = markingHook();
    expect(mark({ useUpstream: 'b' })).to.equal('\0use-upstream=b');
    expect(mark({ skipConsensus: true })).to.equal('\0skip-consensus');
    expect(mark({ useUpstream: 'b', skipConsensus: true })).to.equal('\0use-upstream=b\0skip-consensus');
    expect(mark({ useUpstream: 'b' }, { useUpstream: 'b' })).to.equal('');
    expect(mark({ skipConsensus: true }, { skipConsensus: true })).to.equal('');
    expect(mark({ useUpstream: 'a' })).to.not.equal(mark({ useUpstream: 'b' }));
  });

  it('a plugin mark changes it, with or without a value, bounded in size', () => {
    const ctx = ctxOf({});
    markProvenance(ctx, 'integrity', 'off');
    expect(provenanceKey(ctx)).to.equal('\0integrity=off');
    markProvenance(ctx, 'acme');
    expect(provenanceKey(ctx)).to.equal('\0integrity=off\0acme');
    const long = ctxOf({});
    markProvenance(long, 'use-upstream', 'x'.repeat(5000));
    markProvenance(long, 'pricing', 'y'.repeat(5000));
    expect(provenanceKey(long).length).to.be.at.most(2 * MAX_PROVENANCE_MARK + 40);
    expect(markingHook()({ useUpstream: 'x'.repeat(5000) }).length).to.be.at.most(MAX_PROVENANCE_MARK + 20);
  });
});

/**
 * `failsafe[].consensus` is the consensus plugin's key, added to the failsafe plugin's network
 * entries through the `projects[].networks[].failsafe[]` extension point (docs/consensus-integrity.md):
 * with the default preset `svc validate` reports a bad block with its full path and message and
 * fills its defaults; without the consensus plugin the key is unknown; upstream entries never
 * take it. The integrity plugin's `authoritative`
 * level reads the call's matched entry's settings.
 */
import { expect } from 'chai';
import { ConfigError, loadConfigObject } from '../../../../config/load.ts';
import type { SchemaFragment } from '../../../../config/schema.ts';
import type { Plugin } from '../../../../core/plugin-api.ts';
import { DEFAULT_CONSENSUS } from '../../../../plugins/consensus/index.ts';
import { AUTHORITATIVE_DEFAULTS, authoritativeSettingsOf } from '../../../../plugins/integrity/index.ts';
import type { CallContext } from '../../../../core/pipeline/context.ts';
import { defaultPreset } from '../../../../presets/default.ts';

const fragments = (plugins: Plugin[]) => plugins.flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));
const withEntry = (failsafe: unknown, where: 'network' | 'upstream' = 'network') => ({
  projects: [
    {
      id: 'main',
      networks: [{ architecture: 'evm', evm: { chainId: 1 }, ...(where === 'network' ? { failsafe } : {}) }],
      upstreams: [{ endpoint: 'http://127.0.0.1:1', evm: { chainId: 1 }, ...(where === 'upstream' ? { failsafe } : {}) }],
    },
  ],
});
const problemsOf = (raw: unknown, plugins: Plugin[] = defaultPreset()) => {
  try {
    loadConfigObject(raw, { env: {}, fragments: fragments(plugins) });
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
};

describe('consensus: the failsafe[].consensus config block', () => {
  it('a bad block is reported with its full path and message (as before the block moved out of the core)', () => {
    const at = 'projects[0].networks[0].failsafe[0].consensus';
    expect(
      problemsOf(withEntry([{ consensus: { agreementThreshold: 0, disputeBehavior: 'coinFlip', extra: true, punishMisbehavior: { sitOutPenalty: 'soon' } } }])),
    ).to.deep.equal([
      { path: `${at}.extra`, message: 'unknown key "extra"' },
      { path: `${at}.agreementThreshold`, message: 'must be >= 1' },
      { path: `${at}.punishMisbehavior.sitOutPenalty`, message: 'must be a duration such as "500ms", "15s", "2m" or "1h" (a bare number is milliseconds)' },
      // A union of literals is one line naming them all.
      { path: `${at}.disputeBehavior`, message: 'must be one of "returnError", "acceptMostCommonValidResult", "preferBlockHeadLeader", "onlyBlockHeadLeader"' },
      // `failsafe` is one entry or a list; written as a list, only the problems inside it are reported.
    ]);
  });

  it('a valid block is resolved with its defaults and durations in ms, in the matched entry', () => {
    const { config } = loadConfigObject(withEntry({ matchMethod: 'eth_*', consensus: { agreementThreshold: 3, punishMisbehavior: {} } }), {
      env: {},
      fragments: fragments(defaultPreset()),
    });
    const entry = config.projects[0]!.networks[0]!.settings.failsafe as { consensus: unknown }[] | { consensus: unknown };
    const consensus = (Array.isArray(entry) ? entry[0]! : entry).consensus;
    expect(consensus).to.deep.equal({
      ...DEFAULT_CONSENSUS,
      agreementThreshold: 3,
      fireAndForget: false,
      disputeLogLevel: 'warn',
      punishMisbehavior: { disputeThreshold: 3, disputeWindow: 600_000, sitOutPenalty: 300_000 },
    });
  });

  it('without the consensus plugin the key is unknown; an upstream entry never takes it', () => {
    const noConsensus = defaultPreset().filter((p) => p.name !== 'consensus' && p.name !== 'integrity');
    expect(problemsOf(withEntry([{ consensus: {} }]), noConsensus)).to.deep.include({
      path: 'projects[0].networks[0].failsafe[0].consensus',
      message: 'unknown key "consensus"',
    });
    expect(problemsOf(withEntry([{ consensus: {} }], 'upstream'))).to.deep.include({
      path: 'projects[0].upstreams[0].failsafe[0].consensus',
      message: 'unknown key "consensus"',
    });
  });

  it("integrity's authoritative level takes the call's matched entry's consensus settings, else the consensus defaults", () => {
    const ctx = { state: new Map<symbol, unknown>() } as unknown as CallContext;
    expect(AUTHORITATIVE_DEFAULTS).to.deep.equal({
      maxParticipants: DEFAULT_CONSENSUS.maxParticipants,
      agreementThreshold: DEFAULT_CONSENSUS.agreementThreshold,
    });
    expect(authoritativeSettingsOf(ctx)).to.deep.equal({ maxParticipants: 5, agreementThreshold: 2 });
    // The failsafe plugin's matched entry, where the failsafe plugin puts it (the `failsafe.entry` slot).
    ctx.state.set(Symbol.for('svc.slot.failsafe.entry'), { consensus: { ...DEFAULT_CONSENSUS, maxParticipants: 7, agreementThreshold: 4 } });
    expect(authoritativeSettingsOf(ctx)).to.deep.equal({ maxParticipants: 7, agreementThreshold: 4 });
  });
});

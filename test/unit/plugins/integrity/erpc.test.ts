/**
 * eRPC's `integrity` block mapped onto svc's integrity plugin (plugins/integrity/erpc.ts and the
 * verdict keys in levels.ts / index.ts): the load-time rewrite through the real loader with the
 * default preset (level, headerMode, profiles, project-wide block, eRPC's defaults), each eRPC
 * check entry accepted when svc already does what it asks and refused naming svc's alternative
 * otherwise, the refused keys, `headerMode: profiles`, and the per-finality verdict.
 */
import { expect } from 'chai';
import { ConfigError, loadConfigObject } from '../../../../config/load.ts';
import type { SchemaFragment } from '../../../../config/schema.ts';
import { Anchors } from '../../../../plugins/integrity/anchors.ts';
import { compileIntegrity, ERPC_CHECKS, isReorgSensitive, peerVerdictOf, resolveLevel } from '../../../../plugins/integrity/index.ts';
import { refuseUnknownLevel } from '../../../../plugins/integrity/levels.ts';
import { defaultPreset } from '../../../../presets/default.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
type Doc = Record<string, any>;
const load = (raw: unknown) => loadConfigObject(raw, { fragments: FRAGMENTS, env: {} });
const project = (network: Doc, extra: Doc = {}): Doc => ({
  projects: [
    { id: 'main', networks: [{ evm: { chainId: 1 }, ...network }], upstreams: [{ endpoint: 'http://127.0.0.1:8545', evm: { chainId: 1 } }], ...extra },
  ],
});
const netOf = (r: ReturnType<typeof load>): Doc => r.config.projects[0]!.networks[0]!;

function problems(raw: unknown): string[] {
  try {
    load(raw);
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return (e as ConfigError).problems.map((p) => `${p.path}: ${p.message}`);
  }
  return expect.fail('expected a ConfigError');
}

describe("integrity: eRPC's integrity block at load time", () => {
  it("level becomes the network's directiveDefaults.integrity, with eRPC's defaults headerMode off (deny) and invalidBehavior reject/soft-flag", () => {
    const r = load(project({ integrity: { level: 'corroborated' } }));
    const n = netOf(r);
    expect(n.directiveDefaults.integrity).to.equal('corroborated');
    expect(n.settings.integrity).to.deep.include({ headerMode: 'deny', invalidBehavior: { finalized: 'reject', unfinalized: 'soft-flag' } });
    expect(n.settings.integrity).to.not.have.property('level');
    expect(r.rewrites.map((w) => w.path)).to.include.members([
      'projects[0].networks[0].integrity.level',
      'projects[0].networks[0].directiveDefaults.integrity',
    ]);
  });

  it('headerMode off/full → deny/allow; explicit keys win over the injected defaults', () => {
    const n = netOf(load(project({ integrity: { level: 'intrinsic', headerMode: 'full', invalidBehavior: { unfinalized: 'reject' }, observeOnly: true } })));
    expect(n.settings.integrity).to.deep.include({ headerMode: 'allow', invalidBehavior: { finalized: 'reject', unfinalized: 'reject' }, observeOnly: true });
    expect(netOf(load(project({ integrity: { headerMode: 'off' } }))).settings.integrity.headerMode).to.equal('deny');
  });

  it("the project-wide block is every network's default; a network's block is merged over it", () => {
    const r = load(project({ integrity: { observeOnly: false } }, { integrity: { level: 'authoritative', observeOnly: true } }));
    const n = netOf(r);
    expect(n.directiveDefaults.integrity).to.equal('authoritative');
    expect(n.settings.integrity).to.deep.include({ observeOnly: false, headerMode: 'deny' });
    expect(problems(project({}, { integrity: { level: 'intrinsic' }, networkDefaults: { integrity: { headerMode: 'deny' } } }))[0]).to.match(
      /project integrity block and networkDefaults.integrity are both set/,
    );
  });

  it("eRPC profiles {name: {level}} become svc's {name: {'*': level}}", () => {
    const n = netOf(
      load(project({ integrity: { level: 'intrinsic', headerMode: 'profiles', profiles: { strict: { level: 'authoritative' }, lenient: { level: 'off' } } } })),
    );
    expect(n.settings.integrity.profiles).to.deep.equal({ strict: { '*': 'authoritative' }, lenient: { '*': 'off' } });
    expect(n.settings.integrity.headerMode).to.equal('profiles');
    expect(problems(project({ integrity: { profiles: { p: { level: 'intrinsic', checks: { bloomMatch: { enabled: false } } } } } }))[0]).to.match(
      /per-profile checks are not in svc/,
    );
  });

  it('check entries svc already honours are taken (and dropped); the rest are refused naming what svc does', () => {
    const ok = load(
      project({
        integrity: {
          level: 'authoritative',
          checks: { bloomMatch: { enabled: true }, blockHashRecompute: { onFailure: 'reject' }, hashStability: {}, senderRecovery: { enabled: false } },
        },
      }),
    );
    expect(netOf(ok).settings.integrity).to.not.have.property('checks');
    const p = problems(
      project({
        integrity: {
          level: 'intrinsic',
          checks: {
            nope: {},
            senderRecovery: { enabled: true },
            bloomMatch: { enabled: false },
            hashStability: { enabled: true },
            receiptIdentity: { onFailure: 'soft-flag' },
            txBlockInfo: { params: { strict: 'true' } },
          },
        },
      }),
    );
    expect(p.join('\n')).to.match(/unknown eRPC integrity check "nope"/);
    expect(p.join('\n')).to.match(/check senderRecovery is not in svc: svc recomputes the transaction hash/);
    expect(p.join('\n')).to.match(/bloomMatch .* cannot turn it off alone/);
    expect(p.join('\n')).to.match(/hashStability .* at the corroborated level/);
    expect(p.join('\n')).to.match(/receiptIdentity\)? always rejects\): use observeOnly/);
    expect(p.join('\n')).to.match(/params are not in svc/);
    expect(problems(project({ integrity: { level: 'corroborated', checks: { parentHashLinkage: { onFailure: 'soft-flag' } } } }))[0]).to.match(
      /set invalidBehavior/,
    );
  });

  it('every eRPC check has an svc counterpart or an alternative', () => {
    for (const [id, c] of Object.entries(ERPC_CHECKS)) expect(Boolean(c.svc) !== Boolean(c.instead), id).to.equal(true);
    expect(Object.keys(ERPC_CHECKS)).to.have.length(28);
  });

  it("reorgWindow, follow, stateProbe, misbehaviorsDestination are refused with the alternative (budget is svc's too); a level next to directiveDefaults.integrity too", () => {
    const p = problems(
      project({
        integrity: {
          level: 'intrinsic',
          budget: { maxPerSecond: 5 },
          reorgWindow: 64,
          follow: { enabled: true },
          stateProbe: { enabled: true },
          misbehaviorsDestination: { type: 'file' },
        },
      }),
    );
    for (const k of ['reorgWindow', 'follow', 'stateProbe', 'misbehaviorsDestination'])
      expect(p.join('\n')).to.include(`integrity.${k}: eRPC's integrity ${k} is not in svc`);
    expect(p.join('\n')).to.not.include('budget');
    expect(problems(project({ directiveDefaults: { integrity: 'off' }, integrity: { level: 'intrinsic' } }))[0]).to.match(
      /both set: keep directiveDefaults.integrity/,
    );
    expect(problems(project({ integrity: { level: 'paranoid' } }))[0]).to.match(/integrity level must be one of off, intrinsic, corroborated, authoritative/);
  });
});

describe('integrity: headerMode profiles and the per-finality verdict', () => {
  const s = compileIntegrity({
    headerMode: 'profiles',
    profiles: { strict: { '*': 'authoritative' } },
    invalidBehavior: { finalized: 'reject', unfinalized: 'soft-flag' },
    observeOnly: true,
  });

  it('headerMode profiles: a profile name from the request applies, a bare level does not (the configured one does)', () => {
    expect(resolveLevel('strict', 'intrinsic', s, 'eth_getBlockByNumber').level).to.equal('authoritative');
    expect(resolveLevel('off', 'intrinsic', s, 'eth_getBlockByNumber').level).to.equal('intrinsic');
    expect(() => refuseUnknownLevel('off', s, 'evm:1')).to.not.throw();
    expect(() => refuseUnknownLevel('strct', s, 'evm:1')).to.throw(/unknown integrity level/);
    expect(s.observeOnly).to.equal(true);
  });

  it('the finalized verdict applies when every block of the answer is finalized, else the unfinalized one', () => {
    const a = new Anchors();
    a.add(10n, `0x${'1'.repeat(64)}`, 'x');
    a.add(12n, `0x${'2'.repeat(64)}`, 'x');
    expect(peerVerdictOf(s, a, 12)).to.equal('reject');
    expect(peerVerdictOf(s, a, 11)).to.equal('soft-flag');
    expect(peerVerdictOf(s, a, 0)).to.equal('soft-flag', 'finality unknown');
    expect(compileIntegrity(undefined).invalidBehavior).to.deep.equal({ finalized: 'reject', unfinalized: 'reject' });
  });

  it('only comparisons with other upstreams are reorg-sensitive', () => {
    expect(['corroborated.fork', 'corroborated.unconfirmed', 'authoritative.consensus'].every(isReorgSensitive)).to.equal(true);
    expect(['block.hash', 'corroborated.noPeer', 'corroborated.bloom', 'logs.range'].some(isReorgSensitive)).to.equal(false);
  });
});

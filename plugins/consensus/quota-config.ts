/**
 * Load-time checks of `consensus.requiredParticipants` that one key's schema cannot make (eRPC's
 * validation): `minParticipants` at most the entry's `maxParticipants`, and `minAgreement` at
 * most `minParticipants` (the pool must invite at least as many matching upstreams as the winner
 * must hold).
 */
import { type ConfigDocument, eachNetwork, isConfigObject, type NormalizeReport } from 'svc-proxy/plugin';

/** svc's default `maxParticipants` (schema.ts), repeated here: schema.ts imports this file. */
const DEFAULT_MAX_PARTICIPANTS = 5;

/** The consensus plugin's `normalize`: reports the cross-key problems of `requiredParticipants`. */
export function normalizeRequiredParticipants(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => {
    const list = Array.isArray(n.failsafe) ? n.failsafe : n.failsafe === undefined ? [] : [n.failsafe];
    list.forEach((entry, i) => {
      if (!isConfigObject(entry) || !isConfigObject(entry.consensus) || !Array.isArray(entry.consensus.requiredParticipants)) return;
      const c = entry.consensus;
      const max = typeof c.maxParticipants === 'number' ? c.maxParticipants : DEFAULT_MAX_PARTICIPANTS;
      const at = `${path}.failsafe${Array.isArray(n.failsafe) ? `[${i}]` : ''}.consensus.requiredParticipants`;
      (c.requiredParticipants as unknown[]).forEach((r, j) => {
        if (!isConfigObject(r) || typeof r.minParticipants !== 'number') return;
        if (r.minParticipants > max)
          out.problem(`${at}[${j}].minParticipants`, `minParticipants (${r.minParticipants}) cannot exceed maxParticipants (${max})`);
        if (typeof r.minAgreement === 'number' && r.minAgreement > r.minParticipants)
          out.problem(
            `${at}[${j}].minAgreement`,
            `minAgreement (${r.minAgreement}) cannot exceed minParticipants (${r.minParticipants}): the pool quota must invite at least as many matching upstreams as the winning group must contain`,
          );
      });
    });
  });
}

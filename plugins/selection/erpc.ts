/**
 * eRPC's selection policy written as JavaScript source in YAML (`selectionPolicy.evalFunc: |
 * (upstreams, method) => ...`, run in eRPC's sandbox) is refused at load time (the plugin's
 * `SchemaFragment.normalize`): svc runs no code from a YAML string. The same policy is a function
 * in a TypeScript config (svc.config.ts), where `evalFunc` is a real function.
 */
import { eachNetwork, isConfigObject, type ConfigDocument, type NormalizeReport } from 'svc-proxy/plugin';

/** The selection plugin's `normalize`: a string `evalFunc` is a problem naming the TypeScript form. */
export function refuseSourceEvalFunc(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => {
    const sp = n.selectionPolicy;
    if (!isConfigObject(sp)) return;
    for (const k of ['evalFunc', 'eval']) {
      if (typeof sp[k] === 'string') {
        out.problem(
          `${path}.selectionPolicy.${k}`,
          `eRPC's selection policy as JavaScript source in the config file is not run by svc: write the config as svc.config.ts and set selectionPolicy.evalFunc to a function \`(upstreams, ctx) => upstreams\` (docs/fault-tolerance.md)`,
        );
      }
    }
  });
}

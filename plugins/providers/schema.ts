/**
 * Config of the providers plugin (spec §1.2, §2.10): `projects[].providers[]`, as eRPC users
 * write it, and its resolved form.
 */
import { Strict, type TProperties, Type, type UpstreamInput } from 'svc-proxy/plugin';

/** Default id of a provider's upstreams (spec §2.10); a vendor may append a suffix per endpoint. */
export const DEFAULT_UPSTREAM_ID_TEMPLATE = '<PROVIDER>-<NETWORK>';

const providerSchema = Strict({
  id: Type.String({ minLength: 1, pattern: '^[A-Za-z0-9_.:-]+$', description: 'provider id: `<PROVIDER>` in upstream ids' }),
  vendor: Type.String({
    minLength: 1,
    description:
      "the vendor that turns settings and a chain id into upstreams: `repository`, `hyper`, eRPC's vendors (`alchemy`, `infura`, `drpc`, `quicknode`...: the vendors plugin), or an in-house one",
  }),
  settings: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "the vendor's settings (e.g. `repositoryUrl`, `creditUnits`)" })),
  onlyNetworks: Type.Optional(Type.Array(Type.String(), { description: 'network id globs (`evm:1`, `evm:*`) this provider serves; unset = all' })),
  ignoreNetworks: Type.Optional(
    Type.Array(Type.String(), {
      description:
        'network id globs (`evm:137`, `evm:4*`) this provider never serves, even when `onlyNetworks` admits them; its vendor is never asked for them',
    }),
  ),
  upstreamIdTemplate: Type.Optional(
    Type.String({
      default: DEFAULT_UPSTREAM_ID_TEMPLATE,
      description: 'id of generated upstreams; `<PROVIDER>`, `<VENDOR>`, `<NETWORK>` (`evm:1`) and `<EVM_CHAIN_ID>` (`1`) are replaced',
    }),
  ),
  overrides: Type.Optional(
    Type.Record(Type.String(), Type.Record(Type.String(), Type.Unknown()), {
      description: 'network id glob to upstream settings merged into generated upstreams (e.g. failsafe)',
    }),
  ),
});

/** Schema fragment: `projects[].providers`. */
export const providersSchema: { project: TProperties } = {
  project: {
    providers: Type.Optional(
      Type.Array(providerSchema, {
        description: 'spec §2.10: upstreams generated per chain on its first request; with no providers and no upstreams, `public` is injected (zero-config)',
      }),
    ),
  },
};

/** One resolved provider. */
export interface ProviderConfig {
  id: string;
  vendor: string;
  settings: Record<string, unknown>;
  /** Network id globs served; unset or empty = all. */
  onlyNetworks?: string[];
  /** Network id globs never served (wins over `onlyNetworks`); unset or empty = none. */
  ignoreNetworks?: string[];
  upstreamIdTemplate: string;
  overrides: Record<string, Partial<UpstreamInput>>;
}

/** The providers of a project's settings, defaults filled. */
export function providersOf(settings: Record<string, unknown>): ProviderConfig[] {
  const raw = (settings.providers ?? []) as Array<Partial<ProviderConfig> & { id: string; vendor: string }>;
  return raw.map((p) => ({
    id: p.id,
    vendor: p.vendor,
    settings: p.settings ?? {},
    onlyNetworks: p.onlyNetworks,
    ignoreNetworks: p.ignoreNetworks,
    upstreamIdTemplate: p.upstreamIdTemplate ?? DEFAULT_UPSTREAM_ID_TEMPLATE,
    overrides: p.overrides ?? {},
  }));
}

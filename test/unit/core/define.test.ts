/**
 * `definePlugin` / `definePreset` (svc-proxy/plugin) return their argument unchanged and type it
 * against the contract; `settingsOf` is a typed, copy-free view of a resolved node's plugin
 * keys: the TypeBox static type, with durations and sizes as numbers. The type expectations
 * below are checked by `tsc --noEmit` (the `@ts-expect-error` lines fail the build if they stop
 * being errors).
 */
import { expect } from 'chai';
import {
  definePlugin,
  definePreset,
  Duration,
  settingsOf,
  Size,
  Type,
  type Plugin,
  type PluginHost,
  type Preset,
  type SchemaFragment,
} from '../../../core/plugin-api.ts';
import { loadConfigObject } from '../../../config/load.ts';

describe('definePlugin / definePreset / settingsOf', () => {
  it('definePlugin returns the very object; apply(host) is typed without annotations', () => {
    const seen: string[] = [];
    const raw = {
      name: 'acme',
      version: '1.0.0',
      apply(host: PluginHost) {
        seen.push(host.version);
      },
    };
    expect(definePlugin(raw)).to.equal(raw);
    const p = definePlugin({
      name: 'acme-inferred',
      dependsOn: ['cost'],
      apply(host) {
        // `host` is inferred as PluginHost: this line is type-checked.
        const v: string = host.version;
        seen.push(v);
      },
    });
    const asPlugin: Plugin = p;
    expect(asPlugin.name).to.equal('acme-inferred');
    // The literal's own type is kept.
    const name: 'acme-inferred' = p.name;
    expect(name).to.equal('acme-inferred');
    // @ts-expect-error a plugin needs apply
    definePlugin({ name: 'broken' });
  });

  it('definePreset returns the very function, typed as a Preset', () => {
    const fn = () => [definePlugin({ name: 'x', apply() {} })];
    const preset = definePreset(fn);
    expect(preset).to.equal(fn);
    const asPreset: Preset = preset;
    expect(asPreset().map((p) => p.name)).to.deep.equal(['x']);
    // @ts-expect-error a preset returns plugins
    definePreset(() => [1, 2]);
  });

  it("settingsOf reads a plugin's own keys from a resolved node, typed, durations and sizes as numbers, without a copy", () => {
    const schema = {
      server: {
        acmePricing: Type.Optional(
          Type.Object({
            header: Type.String(),
            unitPrice: Type.Number(),
            window: Duration(),
            cap: Size(),
            tiers: Type.Array(Type.Object({ after: Duration() })),
          }),
        ),
        acmeOn: Type.Optional(Type.Boolean({ default: false })),
        // Declared without Type.Optional: still optional in the view, the config may leave it out.
        acmeLabel: Type.String(),
      },
    } satisfies SchemaFragment;
    const { config } = loadConfigObject(
      { server: { acmePricing: { header: 'X-Acme', unitPrice: 3, window: '2s', cap: '1KiB', tiers: [{ after: '1m' }] } } },
      { fragments: [schema] },
    );
    const s = settingsOf(config.server, schema.server);
    expect(s).to.equal(config.server.settings);
    const pricing = s.acmePricing!;
    const header: string = pricing.header;
    const windowMs: number = pricing.window;
    const capBytes: number = pricing.cap;
    const afterMs: number = pricing.tiers[0]!.after;
    const on: boolean | undefined = s.acmeOn;
    expect({ header, windowMs, capBytes, afterMs, on }).to.deep.equal({ header: 'X-Acme', windowMs: 2000, capBytes: 1024, afterMs: 60_000, on: false });
    // @ts-expect-error a duration is a number once resolved, never the string written in the config
    const asText: string = pricing.window;
    void asText;
    // @ts-expect-error keys the plugin did not declare are not in the view
    void s.httpPort;
    // @ts-expect-error a top-level plugin key may be absent from the config
    const label: string = s.acmeLabel;
    expect(label).to.equal(undefined);
  });
});

/**
 * `svc-proxy/plugins/directives`: typed directives (spec §2.8), the contract between the directives plugin, which resolves each
 * call's directives (config defaults, then the request's headers and query, filtered by
 * `allowClientDirectives`), and the plugins that honour them. The core names no directive: each
 * plugin declares the ones it honours with a {@link Directive} (its header, query parameter,
 * type, value when unset, spec id and config-default schema), registers it with the directives
 * service ({@link declareDirectives}) and reads it with {@link Directive.get}, a property read of
 * the call's resolved `ctx.directives` (no parsing per call: the request is parsed once per HTTP
 * request by the directives plugin).
 */
import { serviceKey, Type, type Directives, type PluginHost, type ServiceKey, type TProperties, type TSchema } from 'svc-proxy/plugin';

/**
 * How a directive's request value is read: `bool` (only `true`, any case, whitespace stripped, is
 * truthy; `1` and `yes` are false), `flag` (`true`, `1` and `yes` are truthy: `force-trace`),
 * `string` (a header value as sent, a query value trimmed).
 */
export type DirectiveType = 'bool' | 'flag' | 'string';

/** A directive as the directives plugin parses it (spec §2.8 table row). */
export interface DirectiveDeclaration {
  /** Query parameter name, also what `allowClientDirectives` matches (lower-case, `[a-z][a-z0-9-]*`). */
  readonly query: string;
  /** Header name (`x-...`, any case). */
  readonly header: string;
  /** Field of `ctx.directives` the value lands in, and its `directiveDefaults` key (an identifier). */
  readonly field: string;
  /** How the request value is read. */
  readonly type: DirectiveType;
  /** Whether a request may set it; default true. False: only `directiveDefaults` does (`enforce-getlogs-range`, §2.8 #8). */
  readonly fromRequest?: boolean;
  /** Whether `allowClientDirectives` governs it; default true. False: never filtered (`force-trace`, §2.8 rule b). */
  readonly filtered?: boolean;
}

/** What a directive's declaration adds for its documentation and config (not part of parsing). */
export interface DirectiveOptions<T> extends DirectiveDeclaration {
  /** The value when neither config nor the request set it: what the honouring plugin does by default. */
  readonly fallback: T;
  /** Where the spec defines it, e.g. `§2.8 #1` (shown in the config reference). */
  readonly spec?: string;
  /** What it does, one line, for the config reference. */
  readonly description?: string;
  /**
   * Schema of its `directiveDefaults` key: default a boolean for `bool`, a string for `string`;
   * `false` for a directive config cannot default (`force-trace`).
   */
  readonly defaultsSchema?: TSchema | false;
}

/**
 * One directive a plugin honours: its declaration (give it to {@link declareDirectives}) and its
 * typed reader. Declare it once, at module level, in the plugin that honours it; a second plugin
 * honouring the same directive declares the very same header, query, field and type (the
 * directives plugin accepts an identical declaration, and refuses a different one).
 */
export class Directive<T extends boolean | string | undefined> {
  /** Field of `ctx.directives` (and key of `directiveDefaults`). */
  readonly field: string;
  /** The parsing part, as handed to the directives service. */
  readonly declaration: DirectiveDeclaration;
  /** The value when unset. */
  readonly fallback: T;
  /** Schema of its `directiveDefaults` key, or undefined when config cannot default it. */
  readonly schema: TSchema | undefined;
  private readonly stringy: boolean;

  /** @param o the declaration, the value when unset, and what the config reference shows */
  constructor(o: DirectiveOptions<T>) {
    this.field = o.field;
    this.declaration = Object.freeze({
      query: o.query,
      header: o.header,
      field: o.field,
      type: o.type,
      fromRequest: o.fromRequest ?? true,
      filtered: o.filtered ?? true,
    });
    this.fallback = o.fallback;
    this.stringy = o.type === 'string';
    const description = [o.spec, o.description].filter((s) => s !== undefined && s !== '').join(' ');
    const opts = description ? { description } : {};
    this.schema = o.defaultsSchema === false ? undefined : (o.defaultsSchema ?? (o.type === 'string' ? Type.String(opts) : Type.Boolean(opts)));
  }

  /**
   * The directive's value in resolved directives (a call's `ctx.directives`, or a network's
   * `directiveDefaults`): a property read, the fallback when unset. A `string` directive a YAML
   * config set to a boolean reads as its text (`true` → `'true'`).
   * @param d resolved directives
   */
  get(d: Directives): T {
    const v = d[this.field];
    if (v === undefined) return this.fallback;
    return (this.stringy && typeof v !== 'string' ? String(v) : v) as T;
  }
}

/**
 * The `directiveDefaults` keys of directives, for a plugin's schema fragment:
 * `schema: { directiveDefaults: directiveDefaultsSchema(RETRY_EMPTY, RETRY_PENDING) }`. A
 * directive without a config default (`defaultsSchema: false`) adds none.
 * @param directives the directives the plugin owns the config keys of
 */
export function directiveDefaultsSchema(...directives: readonly Directive<boolean | string | undefined>[]): TProperties {
  const out: TProperties = {};
  for (const d of directives) if (d.schema) out[d.field] = d.schema;
  return out;
}

/**
 * Registers the directives a plugin honours with the directives plugin, so they are read from
 * their headers and query parameters. Call it in `apply`: when the directives plugin is applied
 * later in the preset, the declaration waits for the `configured` hook; without it, no directive
 * is ever resolved and every {@link Directive.get} returns its fallback.
 * @param host the plugin's host
 * @param plugin the declaring plugin's name (names the tap)
 * @param directives what it honours
 * @throws PluginContractError (from the directives service) for a malformed declaration or one
 *   that collides with another plugin's different declaration
 */
export function declareDirectives(host: PluginHost, plugin: string, ...directives: readonly Directive<boolean | string | undefined>[]): void {
  const declare = (): void => {
    const service = host.services.get(DIRECTIVES_SERVICE);
    if (service) for (const d of directives) service.declare(d.declaration);
  };
  if (host.services.get(DIRECTIVES_SERVICE)) declare();
  else host.hooks.configured.tap(`${plugin}:directives`, declare);
}

/**
 * What the directives plugin offers the plugins that honour directives (every directive is a
 * plugin's, declared with {@link Directive}; `declareDirectives` calls this).
 */
export interface DirectivesService {
  /**
   * Declares a directive: read from its header and query parameter, governed by
   * `allowClientDirectives` (unless `filtered: false`), defaulted from `directiveDefaults.<field>`
   * (a key the plugin's schema fragment declares). Declare in `apply`. An identical declaration
   * again (a second plugin honouring the same directive) is accepted.
   * @throws PluginContractError for a malformed declaration, or a name another declaration uses differently
   */
  declare(d: DirectiveDeclaration): void;
}

/** Key of the directives plugin's {@link DirectivesService}. */
export const DIRECTIVES_SERVICE: ServiceKey<DirectivesService> = serviceKey<DirectivesService>('directives');

/**
 * dependency-cruiser rules for svc's plugin boundary (`npm test` runs them through
 * test/unit/plugin-boundary.test.ts; by hand: `npx depcruise plugins`).
 *
 * Every built-in plugin is written as a third party would write it: it imports the public entries
 * `svc-proxy/plugin`, `svc-proxy/plugin/errors`, `svc-proxy/plugin/contracts`, `svc-proxy/util` and another plugin's
 * contract `svc-proxy/plugins/<name>` by package name (resolved to core/plugin-api.ts through the `svc-source`
 * export condition, as a consumer's import resolves to dist/core/plugin-api.js), files of its own
 * folder, npm packages and node builtins, and nothing else. No exceptions.
 *
 * lib/ holds generic utilities (globs, redaction, canonical JSON, deferred metrics, EVM block
 * references...): no request path, hook, registry or contract. Core and svc-proxy/plugin use them;
 * plugins reach them only through svc-proxy/util (or svc-proxy/plugin for contract types). A lib file depends on npm packages, node builtins,
 * other lib files and, for types and schema helpers only, the core contract; never on plugins.
 *
 * config/ is the config loader (the `svc-proxy/config` entry: schema, YAML/TS loading, validation):
 * core builds on it, it uses the core contract's types and error table, never a plugin.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'plugin-imports-core-internals',
      comment:
        'A plugin imports the public entry by its package name svc-proxy/plugin, as a third party does, never a core file by a relative path (not even core/plugin-api.ts).',
      severity: 'error',
      from: { path: '^plugins/' },
      to: { path: '^core/', dependencyTypes: ['local'] },
    },
    {
      name: 'plugin-imports-core-beyond-the-entry',
      comment:
        'svc-proxy/plugin, svc-proxy/plugin/errors, svc-proxy/plugin/contracts and svc-proxy/util are core/plugin-api.ts, core/plugin-errors.ts, core/plugin-contracts.ts and core/util-api.ts; any other core file is an internal.',
      severity: 'error',
      from: { path: '^plugins/' },
      to: { path: '^core/', pathNot: '^core/(plugin-api|plugin-errors|plugin-contracts|util-api)\\.ts$' },
    },
    {
      name: 'plugin-imports-another-plugin',
      comment:
        "Plugins never import each other's files: what two plugins share is the providing plugin's contract, its entry svc-proxy/plugins/<name> (plugins/<name>/api.ts), reached through a hook, the host or a typed service.",
      severity: 'error',
      from: { path: '^plugins/([^/]+)/' },
      to: { path: '^plugins/', pathNot: ['^plugins/$1/', '^plugins/[^/]+/api\\.ts$'] },
    },
    {
      name: 'plugin-contract-by-path',
      comment: "Another plugin's contract is imported by its package name svc-proxy/plugins/<name>, as a third party does, never by a relative path.",
      severity: 'error',
      from: { path: '^plugins/([^/]+)/' },
      to: { path: '^plugins/[^/]+/api\\.ts$', pathNot: '^plugins/$1/', dependencyTypes: ['local'] },
    },
    {
      name: 'plugin-contract-imports-its-plugin',
      comment:
        "A plugin's contract (plugins/<name>/api.ts, the entry svc-proxy/plugins/<name>) is types, keys and small helpers over the public entries: it never imports its plugin's implementation, so a consumer does not load it.",
      severity: 'error',
      from: { path: '^plugins/[^/]+/api\\.ts$' },
      to: { path: '^plugins/', pathNot: '^plugins/[^/]+/api\\.ts$' },
    },
    {
      name: 'plugin-imports-outside-the-package-api',
      comment:
        'Plugins never import presets, the CLI, tests, benchmarks, built output, or lib/ and config/ by path (the public entries export what they offer).',
      severity: 'error',
      from: { path: '^plugins/' },
      to: { path: '^(presets|bin|test|bench|dist|scripts|lib|config)/' },
    },
    {
      name: 'lib-imports-plugins-or-entry-points',
      comment: 'lib/ and the config loader are below plugins, presets and the CLI: they never import them.',
      severity: 'error',
      from: { path: '^(lib|config)/' },
      to: { path: '^(plugins|presets|bin|test|bench|dist|scripts)/' },
    },
    {
      name: 'lib-imports-core-at-run-time',
      comment: "lib/ may use the core contract's types and its schema helpers (config/schema.ts), nothing of the core that runs.",
      severity: 'error',
      from: { path: '^lib/' },
      to: { path: '^(core|config)/', pathNot: '^config/schema\\.ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'no-runtime-cycle',
      comment:
        'No module may reach itself through imports that exist at run time (a cycle makes load order matter). Type-only imports vanish at compile time and do not count.',
      severity: 'error',
      from: { path: '^(plugins|core|lib|config)/' },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    // Core in layers (docs/architecture.md, "Layers"): wire <- registry <- pipeline <- http <- host
    // <- the public entries. A layer imports only from the layers below it, types included.
    {
      name: 'core-wire-imports-up',
      comment: 'core/wire/ (JSON-RPC, errors, call records) is the lowest core layer: it imports no other core layer.',
      severity: 'error',
      from: { path: '^core/wire/' },
      to: { path: '^core/', pathNot: '^core/wire/' },
    },
    {
      name: 'core-registry-imports-up',
      comment: 'core/registry/ imports only core/wire/ of the core.',
      severity: 'error',
      from: { path: '^core/registry/' },
      to: { path: '^core/', pathNot: '^core/(wire|registry)/' },
    },
    {
      name: 'core-pipeline-imports-up',
      comment: 'core/pipeline/ imports only core/registry/ and core/wire/ of the core.',
      severity: 'error',
      from: { path: '^core/pipeline/' },
      to: { path: '^core/', pathNot: '^core/(wire|registry|pipeline)/' },
    },
    {
      name: 'core-http-imports-up',
      comment: 'core/http/ imports no core/host/ file and no public entry.',
      severity: 'error',
      from: { path: '^core/http/' },
      to: { path: '^core/', pathNot: '^core/(wire|registry|pipeline|http)/' },
    },
    {
      name: 'core-host-imports-an-entry',
      comment: 'core/host/ is below the public entries (core/*.ts): it never imports them.',
      severity: 'error',
      from: { path: '^core/host/' },
      to: { path: '^core/[^/]+\\.ts$' },
    },
    {
      name: 'core-file-outside-a-layer',
      comment: 'Every core module is in a layer folder; only the public entries sit in core/ itself.',
      severity: 'error',
      from: { path: '^core/[^/]+\\.ts$', pathNot: '^core/(plugin-api|plugin-errors|plugin-contracts|util-api)\\.ts$' },
      to: {},
    },
    {
      name: 'no-cycle',
      comment: 'No module of core/, config/ or lib/ reaches itself through imports, run-time or type-only: a type cycle is a layering mistake too.',
      severity: 'error',
      from: { path: '^(core|lib|config)/' },
      to: { circular: true },
    },
    {
      name: 'config-or-lib-imports-core-that-runs',
      comment: 'config/ is below the core: it imports no core file (lib/ may use types of the call records only).',
      severity: 'error',
      from: { path: '^config/' },
      to: { path: '^core/' },
    },
    {
      name: 'plugin-import-unresolvable',
      comment: 'Every import of a plugin must resolve (a typo would otherwise slip past the rules above).',
      severity: 'error',
      from: { path: '^plugins/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['svc-source', 'import', 'types', 'node', 'default'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.d.ts', '.json'],
      mainFields: ['module', 'main', 'types'],
    },
  },
};

/**
 * dependency-cruiser rules for svc's plugin boundary (`npm test` runs them through
 * test/unit/plugin-boundary.test.ts; by hand: `npx depcruise plugins`).
 *
 * Every built-in plugin is written as a third party would write it: it imports the public entry
 * `svc/plugin` by its package name (resolved to core/plugin-api.ts through the `svc-source`
 * export condition, as a consumer's import resolves to dist/core/plugin-api.js), files of its own
 * folder, npm packages and node builtins, and nothing else. No exceptions.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'plugin-imports-core-internals',
      comment: 'A plugin imports the public entry by its package name svc/plugin, as a third party does, never a core file by a relative path (not even core/plugin-api.ts).',
      severity: 'error',
      from: { path: '^plugins/' },
      to: { path: '^core/', dependencyTypes: ['local'] },
    },
    {
      name: 'plugin-imports-core-beyond-the-entry',
      comment: 'svc/plugin is core/plugin-api.ts; any other core file is an internal.',
      severity: 'error',
      from: { path: '^plugins/' },
      to: { path: '^core/', pathNot: '^core/plugin-api\\.ts$' },
    },
    {
      name: 'plugin-imports-another-plugin',
      comment: 'Plugins never import each other: what two plugins share comes through a hook, the host or a typed service of a declared dependency.',
      severity: 'error',
      from: { path: '^plugins/([^/]+)/' },
      to: { path: '^plugins/', pathNot: '^plugins/$1/' },
    },
    {
      name: 'plugin-imports-outside-the-package-api',
      comment: 'Plugins never import presets, the CLI, tests, benchmarks or built output.',
      severity: 'error',
      from: { path: '^plugins/' },
      to: { path: '^(presets|bin|test|bench|dist|scripts)/' },
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

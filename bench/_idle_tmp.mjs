import v8 from 'node:v8';
const { createProxy } = await import('/work/main/dist/core/host/create.js');
const { createLogger } = await import('/work/main/dist/lib/logger.js');
const { loadPreset } = await import('/work/main/dist/presets/index.js');
const plugins = (await loadPreset(process.env.PRESET ?? 'default'))();
const cfg = {
  database: { evmJsonRpcCache: { connectors: [], policies: [] } },
  projects: [
    {
      id: 'main',
      networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
      upstreams: [{ id: 'up0', endpoint: 'http://127.0.0.1:18545', evm: { chainId: 1 } }],
    },
  ],
  server: { httpPort: 0 },
};
const M = (l) =>
  console.log(
    l,
    (process.memoryUsage().rss / 1048576).toFixed(1),
    'max',
    (process.resourceUsage().maxRSS / 1024).toFixed(1),
    'heapTotal',
    (process.memoryUsage().heapTotal / 1048576).toFixed(1),
  );
M('imported');
const proxy = createProxy({ config: cfg, plugins, logger: createLogger('error') });
M('created');
await proxy.start();
M('started');
for (let i = 0; i < 30; i++) {
  await new Promise((r) => setTimeout(r, 10));
  M('t' + i * 10);
}
globalThis.gc();
const m = process.memoryUsage();
console.log(
  'rss',
  (m.rss / 1048576).toFixed(1),
  'heapUsed',
  (m.heapUsed / 1048576).toFixed(1),
  'heapTotal',
  (m.heapTotal / 1048576).toFixed(1),
  'ext',
  (m.external / 1048576).toFixed(1),
  'ab',
  (m.arrayBuffers / 1048576).toFixed(1),
  'maxRSS',
  (process.resourceUsage().maxRSS / 1024).toFixed(1),
);
console.log(Object.fromEntries(Object.entries(v8.getHeapCodeStatistics()).map(([k, v]) => [k, (v / 1048576).toFixed(2)])));
if (process.env.SNAP) v8.writeHeapSnapshot('/tmp/rss/idle.heapsnapshot');
process.exit(0);

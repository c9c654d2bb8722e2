const { createProxy } = await import('/work/main/dist/core/host/create.js');
const { createLogger } = await import('/work/main/dist/lib/logger.js');
const { loadPreset } = await import('/work/main/dist/presets/index.js');
const plugins = (await loadPreset('default'))();
const cfg = {
  database: { evmJsonRpcCache: { connectors: [], policies: [] } },
  projects: [
    {
      id: 'main',
      networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
      upstreams: [{ id: 'up0', endpoint: 'http://127.0.0.1:18545', evm: { chainId: 1 } }],
    },
  ],
  server: { httpPort: 18600 },
};
const proxy = createProxy({ config: cfg, plugins, logger: createLogger('error') });
await proxy.start();
const idle = process.memoryUsage().rss;
process.on('SIGUSR2', () => {
  console.log(
    'idle',
    (idle / 1048576).toFixed(1),
    'now',
    (process.memoryUsage().rss / 1048576).toFixed(1),
    'maxRSS',
    (process.resourceUsage().maxRSS / 1024).toFixed(1),
  );
  process.exit(0);
});
console.log('ready');

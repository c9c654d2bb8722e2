/**
 * `npm run demo`: starts a local anvil node and svc in front of it with two
 * upstream entries for that node (127.0.0.1 and localhost) plus one that refuses connections,
 * sends one call to show the proxy passing over the dead upstream, then prints a curl line and
 * an ethers snippet to try. No internet needed. Ctrl-C stops both.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createProxy } from '../core/host/create.ts';
import { createLogger } from '../lib/logger.ts';
import { PACKAGE_ROOT } from '../core/wire/version.ts';
import { defaultPreset } from '../presets/default.ts';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function waitForRpc(url: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
      if (r.ok) return;
    } catch {
      // not up yet
    }
    if (Date.now() > until) throw new Error(`anvil did not start at ${url}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const anvilPort = await freePort();
const deadPort = await freePort();
const svcPort = Number(process.env.PORT ?? 4000);
const anvil = spawn(
  join(PACKAGE_ROOT, 'node_modules', '.bin', 'anvil'),
  ['--port', String(anvilPort), '--host', '127.0.0.1', '--silent', '--block-time', '2'],
  { stdio: 'ignore' },
);
process.on('exit', () => anvil.kill());
await waitForRpc(`http://127.0.0.1:${anvilPort}`, 10_000);

const proxy = createProxy({
  config: {
    logLevel: 'info',
    server: { httpPort: svcPort, aliasing: { rules: [{ matchDomain: '*', serveProject: 'main' }] } },
    metrics: { port: Number(process.env.METRICS_PORT ?? 4001) },
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: 31337 }, alias: 'anvil' }],
        upstreams: [
          { id: 'dead', endpoint: `http://127.0.0.1:${deadPort}`, evm: { chainId: 31337 } },
          { id: 'anvil-ip', endpoint: `http://127.0.0.1:${anvilPort}`, evm: { chainId: 31337 } },
          { id: 'anvil-localhost', endpoint: `http://localhost:${anvilPort}`, evm: { chainId: 31337 } },
        ],
      },
    ],
  },
  plugins: defaultPreset(),
  logger: createLogger('info'),
});
const addr = await proxy.start();
const url = `http://127.0.0.1:${addr.port}/main/evm/31337`;

const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}' });
const body = await res.text();
process.stdout.write(`
svc is serving anvil (chain 31337) at ${url}
  first call: ${body}
  trace:      X-SVC-Upstreams: ${res.headers.get('x-svc-upstreams')}
              (the "dead" upstream refuses connections: svc swept past it, and from its first
               refusal, a call's or a state poll's, orders it last: svc_upstream_up{upstream="dead"} 0)

Try it:
  curl -s -X POST ${url} -H 'content-type: application/json' \\
    -d '[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_getBalance","params":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]}]' -i

  node --input-type=module -e "
    import { JsonRpcProvider } from 'ethers';
    const p = new JsonRpcProvider('${url}');
    console.log(await p.getBlockNumber(), await p.getBalance('0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266'));"

Metrics: http://127.0.0.1:${process.env.METRICS_PORT ?? 4001}/metrics     Ctrl-C to stop.
`);

const stop = () => {
  proxy.close().finally(() => {
    anvil.kill();
    process.exit(0);
  });
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);

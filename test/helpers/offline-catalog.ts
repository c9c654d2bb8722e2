/**
 * Mocha root hooks (loaded by .mocharc.cjs `require`): tests never reach the internet, and a test
 * project with no upstreams is zero-config (spec §2.10), whose `repository` vendor would fetch
 * the public catalog. Before any test this starts a loopback catalog that lists no chain and
 * points `SVC_PUBLIC_REPOSITORY_URL` at it (unless set already), so zero-config answers "not
 * served" at once; `SVC_HYPER_ROOT_DOMAIN` points the hyper vendor at `hyper.invalid`. Tests that
 * need a catalog start their own and pass it to the vendor.
 *
 * In parallel mode (.mocharc.cjs) each worker process runs these hooks around every file it runs,
 * so `afterAll` also forgets the URL it set: the next file of the same worker starts a new catalog
 * rather than inheriting the address of a closed one.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

let server: Server | undefined;

export const mochaHooks = {
  async beforeAll(): Promise<void> {
    // The hyper vendor's subdomains under a reserved TLD: DNS answers "no such host" at once.
    process.env.SVC_HYPER_ROOT_DOMAIN ??= 'hyper.invalid';
    if (process.env.SVC_PUBLIC_REPOSITORY_URL) return;
    const s = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    s.unref();
    server = s;
    process.env.SVC_PUBLIC_REPOSITORY_URL = `http://127.0.0.1:${(s.address() as AddressInfo).port}/`;
  },
  afterAll(): void {
    if (!server) return;
    server.close();
    server = undefined;
    delete process.env.SVC_PUBLIC_REPOSITORY_URL;
  },
};

/**
 * The operator page at /admin/ui (docs/admin-ui.md) on a real svc in front of two anvil nodes,
 * driven in a real headless Chromium (Debian's `chromium`, through puppeteer-core): the page
 * loads, takes the admin secret, shows both upstreams live over Server-Sent Events, a screenshot
 * is kept at test-output/admin-ui.png, and its cordon button takes upstream A out of the rotation
 * (the next calls' X-SVC-Upstream are all B); uncordoning A and cordoning B with the page's
 * buttons sends every call to A. A page on another site in the same browser can neither read
 * the data nor cordon (no ambient credential). Also: off by default (404, as any unknown path), the data
 * routes need the admin credential (401) and refuse cross-site requests (403), the stream is
 * bounded and closed on shutdown. A cross-site form post to /admin (text/plain) is refused with
 * 415 by test/e2e/admin.test.ts ("needs Content-Type: application/json").
 */
import { expect } from 'chai';
import { mkdirSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { request } from 'undici';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const ADMIN = 'admin-ui-secret-0123456789abcdef';
const CHROMIUM = process.env.SVC_TEST_CHROMIUM ?? '/usr/bin/chromium';
const OUTPUT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test-output');

describe('e2e: admin ui (/admin/ui) in headless Chromium', function () {
  this.timeout(60_000);
  let a: AnvilHandle;
  let b: AnvilHandle;
  let svc: SvcHandle;
  let browser: Browser;
  let page: Page;
  const config = (ui: object | undefined, chainId: number) => ({
    ...NO_CACHE,
    metrics: { enabled: false },
    admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] }, ...(ui ? { ui } : {}) },
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId } }],
        upstreams: [
          // A has a circuit breaker (the page shows its state), B none; both polled often for heads.
          {
            id: 'A',
            endpoint: a.url,
            evm: { chainId, statePollerInterval: '200ms' },
            failsafe: [{ matchMethod: '*', circuitBreaker: { failureThresholdCount: 20, failureThresholdCapacity: 80, halfOpenAfter: '1m' } }],
          },
          { id: 'B', endpoint: b.url, evm: { chainId, statePollerInterval: '200ms' } },
        ],
      },
    ],
  });
  /** The X-SVC-Upstream of `n` calls through the proxy. */
  const servedBy = async (n: number): Promise<string[]> => {
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = await svc.post(`/main/evm/${a.chainId}`, {
        jsonrpc: '2.0',
        id: i,
        method: 'eth_getBalance',
        params: [`0x${(i + 1).toString(16).padStart(40, '0')}`, 'latest'],
      });
      expect(r.status, r.text).to.equal(200);
      out.push(r.headers['x-svc-upstream'] ?? '');
    }
    return out;
  };
  /** Whether the page's row of an upstream says it is in the rotation. */
  const inRotation = (id: string) => page.$eval(`tr[data-upstream="${id}"]`, (tr) => tr.getAttribute('data-in-rotation'));

  before(async () => {
    a = await startAnvil();
    b = await startAnvil();
    // Heads: A at 5, B at 3, so the page shows a head lag of 2 for B.
    await a.rpc('anvil_mine', ['0x5']);
    await b.rpc('anvil_mine', ['0x3']);
    svc = await startSvc(config({ enabled: true, pushInterval: '200ms' }, a.chainId));
    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
    page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
    await a?.stop();
    await b?.stop();
  });

  it('loads, takes the credential, shows both upstreams live; its cordon button takes A out of the next calls', async () => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${svc.url}/admin/ui`, { waitUntil: 'load' });
    await page.type('#credential', ADMIN);
    await page.click('#login button[type=submit]');
    await page.waitForSelector('tr[data-upstream="A"] button[data-action="cordon"]', { timeout: 10_000 });
    await page.waitForSelector('tr[data-upstream="B"] button[data-action="cordon"]');
    // Traffic, so the table and charts have numbers; then a few pushes for the sparklines.
    expect(await servedBy(6)).to.satisfy((ids: string[]) => ids.every((id) => id === 'A' || id === 'B'));
    await page.waitForFunction("document.querySelectorAll('.charts canvas').length >= 2 && document.getElementById('status').className.includes('live')", {
      timeout: 10_000,
    });
    await page.waitForFunction("[...document.querySelectorAll('tr[data-upstream] td:nth-child(4)')].some((td) => Number(td.textContent) > 0)", {
      timeout: 10_000,
    });
    // Heads, head lag and the breaker column.
    await page.waitForFunction("document.querySelector('tr[data-upstream=B] td:nth-child(11)').textContent === '2'", { timeout: 10_000 });
    expect(await page.$eval('tr[data-upstream="A"] td:nth-child(10)', (td) => td.textContent)).to.equal('5');
    expect(await page.$eval('tr[data-upstream="A"] td:nth-child(12)', (td) => td.textContent)).to.equal('closed');
    expect(await page.$eval('tr[data-upstream="B"] td:nth-child(12)', (td) => td.textContent)).to.equal('–');
    mkdirSync(OUTPUT, { recursive: true });
    const shot = join(OUTPUT, 'admin-ui.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(statSync(shot).size).to.be.greaterThan(10_000);

    await page.click('tr[data-upstream="A"] button[data-action="cordon"]');
    await page.waitForSelector('tr[data-upstream="A"] button[data-action="uncordon"]', { timeout: 5000 });
    expect(await inRotation('A')).to.equal('false');
    expect(await page.$eval('tr[data-upstream="A"]', (tr) => tr.textContent)).to.include('admin ui: manual cordon');
    expect(await page.$eval('#action', (e) => e.textContent)).to.include('A cordoned');
    expect(new Set(await servedBy(10))).to.deep.equal(new Set(['B']));

    // Uncordon A with the page, then cordon B: every call goes to A, so A is back in the rotation.
    await page.click('tr[data-upstream="A"] button[data-action="uncordon"]');
    await page.waitForSelector('tr[data-upstream="A"] button[data-action="cordon"]', { timeout: 5000 });
    await page.click('tr[data-upstream="B"] button[data-action="cordon"]');
    await page.waitForSelector('tr[data-upstream="B"] button[data-action="uncordon"]', { timeout: 5000 });
    expect(new Set(await servedBy(10))).to.deep.equal(new Set(['A']));
    await page.click('tr[data-upstream="B"] button[data-action="uncordon"]');
    await page.waitForSelector('tr[data-upstream="B"] button[data-action="cordon"]', { timeout: 5000 });
    const listed = await svc.post(
      '/admin',
      { jsonrpc: '2.0', id: 1, method: 'svc_listCordoned', params: [{ projectId: 'main' }] },
      { 'x-svc-secret-token': ADMIN },
    );
    expect(listed.json.result.cordoned).to.deep.equal([]);
    expect(errors, 'page errors').to.deep.equal([]);
  });

  it('a page on another site, in the same browser after the operator connected, can neither read the data nor cordon (no ambient credential)', async () => {
    // The operator's tab is connected (previous test); the attacker's page is another site (localhost vs 127.0.0.1).
    const evil = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><iframe name="sink"></iframe>
<form id="f" method="POST" action="${svc.url}/admin" enctype="text/plain" target="sink"><input name='{"jsonrpc":"2.0","id":1,"method":"svc_cordonUpstream","params":[{"projectId":"main","upstream":"A"}],"x":"' value='"}'></form>
<script>
window.results = {};
const probe = async (name, url, init) => { try { const r = await fetch(url, init); window.results[name] = r.status; } catch (e) { window.results[name] = 'blocked'; } };
(async () => {
  await probe('snapshot', '${svc.url}/admin/ui/snapshot', { credentials: 'include' });
  await probe('cordonJson', '${svc.url}/admin', { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'svc_cordonUpstream', params: [{ projectId: 'main', upstream: 'A' }] }) });
  await probe('cordonJsonNoCredentials', '${svc.url}/admin', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'svc_cordonUpstream', params: [{ projectId: 'main', upstream: 'A' }] }) });
  await probe('cordonNoCors', '${svc.url}/admin', { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'svc_cordonUpstream', params: [{ projectId: 'main', upstream: 'A' }] }) });
  document.getElementById('f').submit();
  window.results.done = true;
})();
</script>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    const port = (evil.address() as AddressInfo).port;
    const tab = await browser.newPage();
    try {
      await tab.goto(`http://localhost:${port}/`, { waitUntil: 'load' });
      await tab.waitForFunction('window.results && window.results.done === true', { timeout: 10_000 });
      await tab.waitForNetworkIdle({ idleTime: 200, timeout: 10_000 });
      const results = (await tab.evaluate('window.results')) as Record<string, unknown>;
      // No CORS headers on the data: the read fails in the browser. A JSON call fails its
      // preflight, with or without the browser's credentials (the admin's CORS allows no origin
      // by default). The text/plain posts (no-cors fetch, form) are answered 415
      // (test/e2e/admin.test.ts); whatever the answers, nothing was cordoned.
      expect(results.snapshot).to.equal('blocked');
      expect(results.cordonJson).to.equal('blocked');
      expect(results.cordonJsonNoCredentials).to.equal('blocked');
      const listed = await svc.post(
        '/admin',
        { jsonrpc: '2.0', id: 1, method: 'svc_listCordoned', params: [{ projectId: 'main' }] },
        { 'x-svc-secret-token': ADMIN },
      );
      expect(listed.json.result.cordoned).to.deep.equal([]);
    } finally {
      await tab.close();
      evil.closeAllConnections();
      await new Promise((resolve) => evil.close(resolve));
    }
  });

  it('serves the shell to anyone, but the snapshot and the stream only with the admin credential (401), never to a cross-site page (403)', async () => {
    const shell = await svc.send('GET', '/admin/ui');
    expect(shell.status).to.equal(200);
    expect(shell.headers['content-type']).to.match(/^text\/html/);
    expect(shell.headers['content-security-policy']).to.include("frame-ancestors 'none'");
    expect((await svc.send('GET', '/admin/ui/uplot.js')).text).to.include('uPlot');
    for (const path of ['/admin/ui/snapshot', '/admin/ui/events']) {
      expect((await svc.send('GET', path)).status, path).to.equal(401);
      expect((await svc.send('GET', path, undefined, { 'x-svc-secret-token': 'wrong' })).status, path).to.equal(401);
      expect((await svc.send('GET', path, undefined, { 'x-svc-secret-token': ADMIN, 'sec-fetch-site': 'cross-site' })).status, path).to.equal(403);
      expect((await svc.send('GET', path, undefined, { 'x-svc-secret-token': ADMIN, origin: 'https://evil.example' })).status, path).to.equal(403);
      expect((await svc.send('GET', path, undefined, { 'x-svc-secret-token': ADMIN, origin: 'null' })).status, path).to.equal(403);
    }
    const snap = await svc.send('GET', '/admin/ui/snapshot', undefined, { 'x-svc-secret-token': ADMIN, origin: svc.url, 'sec-fetch-site': 'same-origin' });
    expect(snap.status).to.equal(200);
    const net = snap.json.projects[0].networks[0];
    expect(net.upstreams.map((u: { id: string }) => u.id)).to.deep.equal(['A', 'B']);
    expect(net.upstreams[0]).to.include.keys('score', 'errorRate', 'latencyMs', 'headLag', 'breaker', 'cordons', 'inRotation');
    expect(net.upstreams.map((u: { breaker: string }) => u.breaker)).to.deep.equal(['closed', 'none']);
    expect(net.highestLatest).to.equal(5);
  });

  it('streams snapshots as text/event-stream, at most admin.ui.maxStreams at once, and ends them on close', async () => {
    const local = await startSvc(config({ enabled: true, pushInterval: '100ms', maxStreams: 1 }, a.chainId));
    try {
      const open = await request(`${local.url}/admin/ui/events`, { headers: { 'x-svc-secret-token': ADMIN, 'accept-encoding': 'gzip' } });
      expect(open.statusCode).to.equal(200);
      expect(open.headers['content-type']).to.match(/^text\/event-stream/);
      let text = '';
      const ended = new Promise<void>((resolve) => {
        open.body.on('data', (c: Buffer) => (text += c.toString()));
        open.body.on('end', () => resolve());
        open.body.on('error', () => resolve());
      });
      await waitFor(() => (text.match(/event: snapshot\ndata: /g) ?? []).length >= 2, 5000);
      const second = await local.send('GET', '/admin/ui/events', undefined, { 'x-svc-secret-token': ADMIN });
      expect(second.status).to.equal(503);
      const t0 = Date.now();
      await local.close();
      await ended;
      expect(Date.now() - t0, 'close() is not held by the open stream').to.be.lessThan(1500);
    } finally {
      await local.close();
    }
  });

  it('is off unless admin.ui.enabled: /admin/ui is answered as any unknown path (404)', async () => {
    const off = await startSvc(config(undefined, a.chainId));
    try {
      const unknown = await off.send('GET', '/no-such-project/ui');
      for (const path of ['/admin/ui', '/admin/ui/app.js', '/admin/ui/snapshot', '/admin/ui/events']) {
        const r = await off.send('GET', path, undefined, { 'x-svc-secret-token': ADMIN });
        expect(r.status, path).to.equal(404);
        expect(r.json?.code, path).to.equal(unknown.json?.code);
      }
    } finally {
      await off.close();
    }
  });
});

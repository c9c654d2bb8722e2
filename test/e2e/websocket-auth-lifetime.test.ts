/**
 * Open WebSocket connections re-check their credential and have a maximum lifetime, against a
 * real anvil node: an API key disabled through the admin endpoint while its socket is open
 * closes that socket with 1008 within `authRecheckInterval` (another key's socket stays open);
 * a connection older than `maxConnectionLifetime` is closed with 1001 and the client reconnects.
 */
import { expect } from 'chai';
import WebSocket from 'ws';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';

const ADMIN = 'admin-secret-0123456789abcdef';
const KEY_A = 'k_live_a_0123456789abcdef0123456789';
const KEY_B = 'k_live_b_0123456789abcdef0123456789';

/** Opens a socket; resolves once open, with its close code and reason to come. */
function open(url: string, headers: Record<string, string> = {}): Promise<{ ws: WebSocket; closed: Promise<{ code: number; reason: string }> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    ws.once('error', reject);
    ws.once('open', () => resolve({ ws, closed }));
  });
}

/** Resolves with the value, or 'open' after `ms`. */
const within = <T>(p: Promise<T>, ms: number): Promise<T | 'open'> => Promise.race([p, new Promise<'open'>((r) => setTimeout(() => r('open'), ms))]);

describe('e2e: WebSocket credential re-check and maximum lifetime', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  const sockets: WebSocket[] = [];

  before(async () => {
    anvil = await startAnvil();
    svc = await startSvc({
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      server: { websocket: { authRecheckInterval: '200ms', maxConnectionLifetime: '5s' } },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
          auth: { strategies: [{ type: 'database', connector: { id: 'keys', driver: 'memory' } }] },
        },
      ],
    });
    for (const [apiKey, userId] of [
      [KEY_A, 'alice'],
      [KEY_B, 'bob'],
    ]) {
      const r = await svc.post(
        '/admin',
        { jsonrpc: '2.0', id: 1, method: 'svc_addApiKey', params: [{ projectId: 'main', connectorId: 'keys', apiKey, userId }] },
        { 'x-svc-secret-token': ADMIN },
      );
      expect(r.json.result.success).to.equal(true);
    }
  });
  after(async () => {
    for (const s of sockets) s.terminate();
    await svc?.close();
    await anvil?.stop();
  });

  const url = () => `${svc.url.replace(/^http/, 'ws')}/main/evm/${anvil.chainId}`;

  it('a key disabled while its socket is open closes that socket with 1008; another key stays open', async () => {
    const a = await open(url(), { authorization: `Bearer ${KEY_A}` });
    const b = await open(url(), { authorization: `Bearer ${KEY_B}` });
    sockets.push(a.ws, b.ws);
    expect(await within(a.closed, 600)).to.equal('open');
    const r = await svc.post(
      '/admin',
      { jsonrpc: '2.0', id: 2, method: 'svc_updateApiKey', params: [{ projectId: 'main', connectorId: 'keys', apiKey: KEY_A, updates: { enabled: false } }] },
      { 'x-svc-secret-token': ADMIN },
    );
    expect(r.json.error, JSON.stringify(r.json)).to.equal(undefined);
    const closed = await within(a.closed, 5000);
    expect(closed).to.not.equal('open');
    expect((closed as { code: number }).code).to.equal(1008);
    expect((closed as { reason: string }).reason).to.match(/^credential no longer valid/);
    expect(b.ws.readyState).to.equal(WebSocket.OPEN);
  });

  it('a connection older than maxConnectionLifetime is closed with 1001, and the client reconnects', async () => {
    const started = Date.now();
    const b = await open(url(), { authorization: `Bearer ${KEY_B}` });
    sockets.push(b.ws);
    const closed = await within(b.closed, 15_000);
    expect(closed).to.deep.equal({ code: 1001, reason: 'connection lifetime reached: reconnect' });
    expect(Date.now() - started).to.be.at.least(4500);
    const again = await open(url(), { authorization: `Bearer ${KEY_B}` });
    sockets.push(again.ws);
    expect(again.ws.readyState).to.equal(WebSocket.OPEN);
  });
});

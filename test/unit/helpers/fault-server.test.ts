/**
 * Self-check of the test helpers: the scriptable fault server (every FaultStep), the free-port
 * helper and the anvil launcher.
 */
import { expect } from 'chai';
import { createServer } from 'node:net';
import { request } from 'undici';
import { startFaultServer, type FaultServer } from '../../helpers/fault-server.ts';
import { freePort } from '../../helpers/ports.ts';
import { startAnvil } from '../../helpers/anvil.ts';

interface RawAnswer {
  status: number;
  text: string;
  contentType: string | undefined;
}

async function post(url: string, body: string): Promise<RawAnswer> {
  const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const text = await res.body.text();
  const ct = res.headers['content-type'];
  return { status: res.statusCode, text, contentType: Array.isArray(ct) ? ct[0] : ct };
}

const call = (method: string, id: unknown = 1, params: unknown[] = []) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

async function rpc(fs: FaultServer, method: string, id: unknown = 1, params: unknown[] = []): Promise<any> {
  const a = await post(fs.url, call(method, id, params));
  return JSON.parse(a.text);
}

/** Resolves once `pred` holds, checking on every event-loop turn (no fixed sleeps). */
async function until(pred: () => boolean, timeoutMs = 2000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setImmediate(r));
  }
}

describe('test helpers', () => {
  describe('fault server', () => {
    let fs: FaultServer;
    beforeEach(async () => {
      fs = await startFaultServer();
    });
    afterEach(async () => {
      await fs.close();
    });

    it('listens on 127.0.0.1 with a free port', () => {
      expect(fs.url).to.equal(`http://127.0.0.1:${fs.port}`);
      expect(fs.port).to.be.greaterThan(0);
    });

    describe('ok', () => {
      it('built-in table: eth_chainId, eth_blockNumber, net_version, eth_syncing, eth_getBlockByNumber, an empty account for state reads, others null', async () => {
        expect((await rpc(fs, 'eth_chainId')).result).to.equal('0x7a69');
        expect((await rpc(fs, 'eth_blockNumber')).result).to.equal('0x10');
        expect((await rpc(fs, 'net_version')).result).to.equal('31337');
        expect((await rpc(fs, 'eth_syncing')).result).to.equal(false);
        const block = (await rpc(fs, 'eth_getBlockByNumber', 1, ['0x5', false])).result;
        expect(block).to.include.keys('number', 'hash', 'timestamp');
        expect(block.number).to.equal('0x5');
        expect(block.hash).to.match(/^0x[0-9a-f]{64}$/);
        expect((await rpc(fs, 'eth_getBlockByNumber', 1, ['latest', false])).result.number).to.equal('0x10');
        expect(await rpc(fs, 'eth_getBalance', 1, ['0x0', 'latest'])).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0x0' });
        expect((await rpc(fs, 'eth_getCode', 1, ['0x0', 'latest'])).result).to.equal('0x');
        expect(await rpc(fs, 'eth_getTransactionByHash', 1, [`0x${'0'.repeat(64)}`])).to.deep.equal({ jsonrpc: '2.0', id: 1, result: null });
      });

      it('explicit result', async () => {
        fs.script({ kind: 'ok', result: { custom: [1, 2] } });
        expect((await rpc(fs, 'eth_call')).result).to.deep.equal({ custom: [1, 2] });
      });

      it('handler gives the default result; undefined falls back to the table', async () => {
        const h = await startFaultServer({
          chainId: 10,
          handler: (req) => (req.method === 'eth_blockNumber' ? '0x99' : req.method === 'eth_echo' ? req.params : undefined),
        });
        try {
          expect((await rpc(h, 'eth_blockNumber')).result).to.equal('0x99');
          expect((await rpc(h, 'eth_echo', 1, ['a', 1])).result).to.deep.equal(['a', 1]);
          expect((await rpc(h, 'eth_chainId')).result).to.equal('0xa');
          expect((await rpc(h, 'net_version')).result).to.equal('10');
        } finally {
          await h.close();
        }
      });

      it('a throwing handler is answered with -32603 (also after a delay)', async () => {
        const h = await startFaultServer({
          handler: () => {
            throw new Error('handler bug');
          },
        });
        try {
          const a = await rpc(h, 'eth_call');
          expect(a.error).to.deep.equal({ code: -32603, message: 'fault server: handler bug' });
          h.script({ kind: 'delay', ms: 1 });
          expect((await rpc(h, 'eth_call')).error.code).to.equal(-32603);
        } finally {
          await h.close();
        }
      });

      it('echoes ids exactly: big integers, strings, null', async () => {
        const big = await post(fs.url, '{"jsonrpc":"2.0","id":12345678901234567890,"method":"eth_blockNumber"}');
        expect(big.text).to.equal('{"jsonrpc":"2.0","id":12345678901234567890,"result":"0x10"}');
        expect((await rpc(fs, 'eth_blockNumber', 'abc')).id).to.equal('abc');
        expect((await rpc(fs, 'eth_blockNumber', null)).id).to.equal(null);
        const absent = await post(fs.url, '{"jsonrpc":"2.0","method":"eth_blockNumber"}');
        expect(JSON.parse(absent.text).id).to.equal(null);
      });

      it('records calls (method, params, id, headers)', async () => {
        await post(fs.url, call('eth_getBalance', 7, ['0xabc', 'latest']));
        expect(fs.calls).to.have.length(1);
        expect(fs.calls[0]).to.deep.include({ method: 'eth_getBalance', params: ['0xabc', 'latest'], id: 7, batch: false });
        expect(fs.calls[0]!.headers['content-type']).to.equal('application/json');
      });
    });

    it('script steps are consumed one per request, in order, then the default applies', async () => {
      fs.script({ kind: 'ok', result: 'first' }, { kind: 'rpcError', code: -32000, message: 'second' }, { kind: 'ok', result: 'third' });
      expect(fs.pendingSteps()).to.equal(3);
      expect((await rpc(fs, 'eth_call')).result).to.equal('first');
      expect((await rpc(fs, 'eth_call')).error.message).to.equal('second');
      expect((await rpc(fs, 'eth_call')).result).to.equal('third');
      expect(fs.pendingSteps()).to.equal(0);
      expect((await rpc(fs, 'eth_blockNumber')).result).to.equal('0x10');
    });

    it('eth_chainId does not consume the script by default', async () => {
      fs.script({ kind: 'status', status: 503 });
      expect((await rpc(fs, 'eth_chainId')).result).to.equal('0x7a69');
      expect(fs.pendingSteps()).to.equal(1);
      expect((await post(fs.url, call('eth_blockNumber'))).status).to.equal(503);
    });

    it('scriptChainId: true makes eth_chainId consume the script', async () => {
      const s = await startFaultServer({ scriptChainId: true });
      try {
        s.script({ kind: 'status', status: 503 });
        expect((await post(s.url, call('eth_chainId'))).status).to.equal(503);
        expect(s.pendingSteps()).to.equal(0);
      } finally {
        await s.close();
      }
    });

    it('setDefault changes the step used once the script is empty; reset restores ok', async () => {
      fs.setDefault({ kind: 'rpcError', code: -32603, message: 'down' });
      fs.script({ kind: 'ok', result: '0x1' });
      expect((await rpc(fs, 'eth_blockNumber')).result).to.equal('0x1');
      expect((await rpc(fs, 'eth_blockNumber')).error.message).to.equal('down');
      expect((await rpc(fs, 'eth_blockNumber')).error.message).to.equal('down');
      fs.script({ kind: 'ok' });
      fs.reset();
      expect(fs.calls).to.deep.equal([]);
      expect(fs.pendingSteps()).to.equal(0);
      expect((await rpc(fs, 'eth_blockNumber')).result).to.equal('0x10');
    });

    it('delay: answers after at least ms, then the `then` step (default ok)', async () => {
      fs.script({ kind: 'delay', ms: 60 }, { kind: 'delay', ms: 10, then: { kind: 'rpcError', code: 3, message: 'execution reverted' } });
      const t0 = performance.now();
      expect((await rpc(fs, 'eth_blockNumber')).result).to.equal('0x10');
      expect(performance.now() - t0).to.be.at.least(55);
      expect((await rpc(fs, 'eth_call')).error).to.deep.equal({ code: 3, message: 'execution reverted' });
    });

    it('hang: never answers; close() destroys the socket', async () => {
      fs.script({ kind: 'hang' });
      const pending = post(fs.url, call('eth_blockNumber')).then(
        () => 'answered',
        () => 'failed',
      );
      await until(() => fs.calls.length === 1);
      let settled = false;
      void pending.then(() => (settled = true));
      await new Promise((r) => setImmediate(r));
      expect(settled).to.equal(false);
      await fs.close();
      expect(await pending).to.equal('failed');
    });

    it('reset: the socket is destroyed', async () => {
      fs.script({ kind: 'reset' });
      let err: unknown;
      try {
        await post(fs.url, call('eth_blockNumber'));
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(Error);
      // The server still serves the next request.
      expect((await rpc(fs, 'eth_blockNumber')).result).to.equal('0x10');
    });

    it('status: the given HTTP status and body', async () => {
      fs.script(
        { kind: 'status', status: 429, body: 'Too Many Requests' },
        { kind: 'status', status: 401, body: '{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Must be authenticated!"}}' },
        { kind: 'status', status: 502 },
      );
      const a = await post(fs.url, call('eth_blockNumber'));
      expect(a).to.deep.include({ status: 429, text: 'Too Many Requests' });
      const b = await post(fs.url, call('eth_blockNumber'));
      expect(b.status).to.equal(401);
      expect(b.contentType).to.equal('application/json');
      expect(JSON.parse(b.text).error.code).to.equal(-32600);
      const c = await post(fs.url, call('eth_blockNumber'));
      expect(c).to.deep.include({ status: 502, text: '' });
    });

    it('rpcError: HTTP 200 with code, message and data, id echoed', async () => {
      fs.script({ kind: 'rpcError', code: 3, message: 'execution reverted: nope', data: '0x08c379a0' }, { kind: 'rpcError', code: -32005, message: 'limit' });
      const a = await post(fs.url, call('eth_call', 'x'));
      expect(a.status).to.equal(200);
      expect(JSON.parse(a.text)).to.deep.equal({ jsonrpc: '2.0', id: 'x', error: { code: 3, message: 'execution reverted: nope', data: '0x08c379a0' } });
      expect(JSON.parse((await post(fs.url, call('eth_call', 2))).text).error).to.deep.equal({ code: -32005, message: 'limit' });
    });

    it('garbage: HTTP 200 with a body that is not JSON', async () => {
      fs.script({ kind: 'garbage' });
      const a = await post(fs.url, call('eth_blockNumber'));
      expect(a.status).to.equal(200);
      expect(a.text.length).to.be.greaterThan(0);
      expect(() => JSON.parse(a.text)).to.throw();
    });

    it('wrongId: a valid response whose id differs from the request id', async () => {
      fs.script({ kind: 'wrongId' }, { kind: 'wrongId' }, { kind: 'wrongId' });
      const a = JSON.parse((await post(fs.url, call('eth_blockNumber', 5))).text);
      expect(a.result).to.equal('0x10');
      expect(a.id).to.be.a('number').and.not.equal(5);
      expect(JSON.parse((await post(fs.url, call('eth_blockNumber', 'abc'))).text).id)
        .to.be.a('string')
        .and.not.equal('abc');
      expect(JSON.parse((await post(fs.url, call('eth_blockNumber', null))).text).id).to.not.equal(null);
    });

    it('truncated: the first half of a valid response', async () => {
      fs.script({ kind: 'truncated' });
      const a = await post(fs.url, call('eth_getBlockByNumber', 1, ['0x1', false]));
      expect(a.status).to.equal(200);
      expect(a.text.startsWith('{"jsonrpc":"2.0","id":1,')).to.equal(true);
      expect(() => JSON.parse(a.text)).to.throw();
      fs.reset();
      const full = await post(fs.url, call('eth_getBlockByNumber', 1, ['0x1', false]));
      expect(full.text.startsWith(a.text)).to.equal(true);
      expect(a.text.length).to.equal(Math.floor(full.text.length / 2));
    });

    it('batch: answered element-wise with ok, ids echoed, script untouched', async () => {
      fs.script({ kind: 'status', status: 500 });
      const a = await post(
        fs.url,
        `[${call('eth_chainId', 1)},${call('eth_blockNumber', 'b')},{"jsonrpc":"2.0","id":12345678901234567890,"method":"eth_syncing"}]`,
      );
      expect(a.status).to.equal(200);
      expect(a.text).to.contain('"id":12345678901234567890');
      expect(JSON.parse(a.text.replace('12345678901234567890', '3'))).to.deep.equal([
        { jsonrpc: '2.0', id: 1, result: '0x7a69' },
        { jsonrpc: '2.0', id: 'b', result: '0x10' },
        { jsonrpc: '2.0', id: 3, result: false },
      ]);
      expect(fs.pendingSteps()).to.equal(1);
      expect(fs.calls.map((c) => [c.method, c.batch])).to.deep.equal([
        ['eth_chainId', true],
        ['eth_blockNumber', true],
        ['eth_syncing', true],
      ]);
      expect((await post(fs.url, '[]')).text).to.equal('[]');
    });

    it('scriptBatch: true applies one step to the whole batch request', async () => {
      const s = await startFaultServer({ scriptBatch: true });
      try {
        s.script({ kind: 'status', status: 503 }, { kind: 'rpcError', code: -32000, message: 'x' });
        expect((await post(s.url, `[${call('eth_blockNumber', 1)}]`)).status).to.equal(503);
        const b = JSON.parse((await post(s.url, `[${call('eth_blockNumber', 1)},${call('eth_blockNumber', 2)}]`)).text);
        expect(b.map((e: { id: number; error: { message: string } }) => [e.id, e.error.message])).to.deep.equal([
          [1, 'x'],
          [2, 'x'],
        ]);
      } finally {
        await s.close();
      }
    });

    it('close() is idempotent and frees the port', async () => {
      const port = fs.port;
      await fs.close();
      await fs.close();
      const srv = createServer();
      await new Promise<void>((res, rej) => srv.once('error', rej).listen(port, '127.0.0.1', () => res()));
      await new Promise<void>((res) => srv.close(() => res()));
    });
  });

  describe('freePort', () => {
    it('returns distinct bindable ports', async () => {
      const a = await freePort();
      const b = await freePort();
      expect(a).to.be.within(1, 65535);
      expect(b).to.be.within(1, 65535);
      const srv = createServer();
      await new Promise<void>((res, rej) => srv.once('error', rej).listen(a, '127.0.0.1', () => res()));
      await new Promise<void>((res) => srv.close(() => res()));
    });
  });

  describe('startAnvil', () => {
    it('starts on a free port with the requested chain id, answers rpc, stops', async () => {
      const a = await startAnvil({ chainId: 5 });
      let stopped = false;
      try {
        expect(a.url).to.equal(`http://127.0.0.1:${a.port}`);
        expect(a.chainId).to.equal(5);
        expect(await a.rpc('eth_chainId')).to.equal('0x5');
        let err: unknown;
        try {
          await a.rpc('eth_foo');
        } catch (e) {
          err = e;
        }
        expect(err).to.be.instanceOf(Error);
        expect((err as { code?: number }).code).to.equal(-32601);
        await a.stop();
        stopped = true;
        let down = false;
        try {
          await fetch(a.url, { method: 'POST', body: call('eth_chainId') });
        } catch {
          down = true;
        }
        expect(down, 'anvil no longer answers after stop()').to.equal(true);
      } finally {
        if (!stopped) await a.stop();
      }
    });

    it('defaults to chain id 31337', async () => {
      const a = await startAnvil();
      try {
        expect(a.chainId).to.equal(31337);
        expect(await a.rpc('eth_chainId')).to.equal('0x7a69');
      } finally {
        await a.stop();
      }
    });
  });
});

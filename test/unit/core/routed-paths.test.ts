/**
 * Which requests go through the router (core/http/routed-paths.ts): a static POST route
 * such as `/admin` must not send every proxy POST through route matching.
 */
import { expect } from 'chai';
import Router from '@koa/router';
import { routedPaths, staticKey } from '../../../core/http/routed-paths.ts';

describe('routed paths (no route matching for proxy POSTs)', () => {
  it('keeps static routes as a set per method and marks pattern routes as any path', () => {
    const r = new Router();
    r.post('/admin', () => undefined);
    r.options('/admin', () => undefined);
    r.get('/{*rest}', () => undefined);
    const paths = routedPaths(r);
    expect(paths?.get('POST')).to.be.instanceOf(Set);
    expect((paths?.get('POST') as Set<string>).has(staticKey('/ADMIN/'))).to.equal(true);
    expect((paths?.get('POST') as Set<string>).has(staticKey('/main/evm/1'))).to.equal(false);
    expect(paths?.get('GET')).to.equal('any');
    expect(paths?.get('DELETE')).to.equal(undefined);
    r.post('/{*rest}', () => undefined);
    expect(routedPaths(r)?.get('POST')).to.equal('any');
  });

  it('a use() middleware sees every request', () => {
    const r = new Router();
    r.use((_k, next) => next());
    expect(routedPaths(r)).to.equal(undefined);
  });
});

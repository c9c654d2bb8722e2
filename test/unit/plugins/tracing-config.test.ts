/**
 * eRPC's tracing keys in svc's tracing plugin: the transport inferred as eRPC's endpoint forms
 * imply, `host:port` turned into URLs, empty resource attributes left out, and
 * `forceTraceMatchers` with eRPC's AND/OR semantics; the `detailed` params attribute is bounded.
 */
import { expect } from 'chai';
import type { ResolvedConfig } from '../../../core/plugin-api.ts';
import { ConfigError } from '../../../core/plugin-errors.ts';
import { compileForceTrace, MAX_PARAMS_ATTRIBUTE, paramsAttribute } from '../../../plugins/tracing/index.ts';
import { tracingConfigOf } from '../../../plugins/tracing/schema.ts';

const of = (tracing: Record<string, unknown>) => tracingConfigOf({ settings: { tracing } } as unknown as ResolvedConfig);

describe('tracing: eRPC config keys', () => {
  it("infers the transport: eRPC's host:port means gRPC, a URL or nothing OTLP/HTTP; protocol wins", () => {
    expect(of({})).to.deep.include({ protocol: 'http', endpoint: 'http://localhost:4318/v1/traces' });
    expect(of({ endpoint: 'otel:4317' })).to.deep.include({ protocol: 'grpc', endpoint: 'http://otel:4317' });
    expect(of({ endpoint: '[::1]:4317' })).to.deep.include({ protocol: 'grpc', endpoint: 'http://[::1]:4317' });
    expect(of({ endpoint: 'https://otel.example:4317', protocol: 'grpc' })).to.deep.include({ protocol: 'grpc', endpoint: 'https://otel.example:4317' });
    expect(of({ protocol: 'grpc' })).to.deep.include({ endpoint: 'http://localhost:4317' });
    expect(of({ endpoint: 'otel:4318', protocol: 'http' })).to.deep.include({ protocol: 'http', endpoint: 'http://otel:4318/v1/traces' });
    expect(of({ endpoint: 'http://otel:4318/v1/traces' })).to.deep.include({ protocol: 'http', endpoint: 'http://otel:4318/v1/traces' });
  });

  it('names the key of a bad endpoint; leaves out empty resource attributes', () => {
    expect(() => of({ endpoint: 'ftp://x' })).to.throw(ConfigError, /endpoint/);
    expect(of({ resourceAttributes: { a: '1', b: '' } }).resourceAttributes).to.deep.equal({ a: '1' });
  });

  it('tls: host:port becomes https://; an unreadable file, half a client pair or an http:// URL is an error naming the key', () => {
    const problems = (tracing: Record<string, unknown>) => {
      try {
        of({ enabled: true, ...tracing });
      } catch (e) {
        expect(e).to.be.instanceOf(ConfigError);
        return (e as ConfigError).problems.map((p) => p.path);
      }
      return [];
    };
    expect(of({ enabled: true, endpoint: 'otel:4317', tls: { enabled: true, insecureSkipVerify: true } })).to.deep.include({
      endpoint: 'https://otel:4317',
      tls: { insecureSkipVerify: true },
    });
    expect(of({ enabled: true, endpoint: 'otel:4318', protocol: 'http', tls: { enabled: true } }).endpoint).to.equal('https://otel:4318/v1/traces');
    expect(of({ endpoint: 'otel:4317', tls: { enabled: true, caFile: '/nonexistent' } })).to.not.have.property('tls'); // tracing off: no file read
    expect(problems({ tls: { enabled: true, caFile: '/nonexistent/ca.pem' } })).to.deep.equal(['tracing.tls.caFile']);
    expect(problems({ tls: { enabled: true, certFile: '/x.pem' } })).to.deep.equal(['tracing.tls.keyFile']);
    expect(problems({ endpoint: 'http://otel:4318/v1/traces', tls: { enabled: true } })).to.deep.equal(['tracing.endpoint']);
  });

  it('forceTraceMatchers: | is OR, * a wildcard; both fields AND; one field alone; an empty entry never matches', () => {
    expect(compileForceTrace([])).to.equal(undefined);
    expect(compileForceTrace([{}])).to.equal(undefined);
    const f = compileForceTrace([{ method: 'debug_*|trace_*' }, { network: 'evm:1|evm:42161', method: 'eth_call' }, { network: 'evm:10' }])!;
    expect(f('evm:5', 'trace_block')).to.equal(true);
    expect(f('evm:5', 'debug_traceTransaction')).to.equal(true);
    expect(f('evm:42161', 'eth_call')).to.equal(true);
    expect(f('evm:5', 'eth_call')).to.equal(false);
    expect(f('evm:10', 'eth_blockNumber')).to.equal(true);
    expect(f('evm:1', 'eth_getBalance')).to.equal(false);
  });

  it('the params attribute is JSON cut at 1024 characters', () => {
    expect(paramsAttribute(['0x1', 'latest'])).to.equal('["0x1","latest"]');
    expect(paramsAttribute(undefined)).to.equal('null');
    const long = paramsAttribute(['x'.repeat(5000)]);
    expect(long.length).to.equal(MAX_PARAMS_ATTRIBUTE + 1);
    expect(long.endsWith('…')).to.equal(true);
    expect(paramsAttribute([1n])).to.equal('"(unserialisable)"');
  });
});

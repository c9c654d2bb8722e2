/**
 * eRPC's tracing keys from an eRPC-shaped YAML, exported over OTLP/gRPC to a real gRPC server
 * started here (@grpc/grpc-js serving the OTLP TraceService Export, its messages loaded by
 * @grpc/proto-loader), with svc serving anvil: `protocol: grpc` (and gRPC inferred from eRPC's
 * `host:port` endpoint), `headers` as gRPC metadata, `resourceAttributes`, `forceTraceMatchers`
 * (matched calls traced at a near-zero sample rate, others not) and `detailed` (the forward span
 * and the params attribute, absent without it). The YAML re-validates through `svc validate --print`.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startSvc } from '../helpers/svc.ts';
import { runSvcCli } from '../helpers/svc-cli.ts';

/** The OTLP trace messages this test reads (field numbers of opentelemetry-proto's trace/v1, common/v1, resource/v1, collector/trace/v1). */
const OTLP_PROTO = `
syntax = "proto3";
package opentelemetry.proto.collector.trace.v1;
service TraceService { rpc Export(ExportTraceServiceRequest) returns (ExportTraceServiceResponse) {} }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ExportTraceServiceResponse { ExportTracePartialSuccess partial_success = 1; }
message ExportTracePartialSuccess { int64 rejected_spans = 1; string error_message = 2; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message InstrumentationScope { string name = 1; string version = 2; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
  string name = 5; int32 kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
}
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue { oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; } }
`;

interface KeyValue {
  key: string;
  value?: { stringValue?: string; boolValue?: boolean; intValue?: string; doubleValue?: number };
}
interface OtlpSpan {
  name: string;
  spanId: Buffer;
  parentSpanId: Buffer;
  attributes: KeyValue[];
}
interface ExportRequest {
  resourceSpans: Array<{ resource?: { attributes: KeyValue[] }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
}

/** What the collector received: spans (with their resource's attributes) and each export's metadata. */
interface Collector {
  port: number;
  spans: Array<OtlpSpan & { resource: Record<string, unknown> }>;
  metadata: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

const flat = (kvs: readonly KeyValue[] = []) =>
  Object.fromEntries(kvs.map((kv) => [kv.key, kv.value?.stringValue ?? kv.value?.boolValue ?? kv.value?.intValue ?? kv.value?.doubleValue]));

/** A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA (PEM files in `dir`). */
function makePki(dir: string): { ca: string; serverKey: string; serverCert: string; clientKey: string; clientCert: string } {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=collector test CA');
  writeFileSync(join(dir, 'srv.ext'), 'subjectAltName=IP:127.0.0.1\n');
  for (const [name, ext] of [
    ['srv', ['-extfile', 'srv.ext']],
    ['cli', []],
  ] as const) {
    ssl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    ssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '1', ...ext);
  }
  const f = (n: string) => join(dir, n);
  return { ca: f('ca.crt'), serverKey: f('srv.key'), serverCert: f('srv.crt'), clientKey: f('cli.key'), clientCert: f('cli.crt') };
}

async function startCollector(dir: string, tls?: ReturnType<typeof makePki>): Promise<Collector> {
  const file = join(dir, 'otlp-trace.proto');
  writeFileSync(file, OTLP_PROTO);
  const def = protoLoader.loadSync(file, { longs: String, defaults: true, arrays: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    opentelemetry: { proto: { collector: { trace: { v1: { TraceService: grpc.ServiceClientConstructor } } } } };
  };
  const service = pkg.opentelemetry.proto.collector.trace.v1.TraceService.service;
  const c: Collector = { port: 0, spans: [], metadata: [], close: async () => undefined };
  const server = new grpc.Server();
  server.addService(service, {
    Export(call: grpc.ServerUnaryCall<ExportRequest, unknown>, done: grpc.sendUnaryData<unknown>) {
      c.metadata.push(call.metadata.getMap());
      for (const rs of call.request.resourceSpans) {
        const resource = flat(rs.resource?.attributes);
        for (const ss of rs.scopeSpans) for (const s of ss.spans) c.spans.push({ ...s, resource });
      }
      done(null, {});
    },
  });
  c.port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      '127.0.0.1:0',
      tls
        ? grpc.ServerCredentials.createSsl(
            readFileSync(tls.ca),
            [{ private_key: readFileSync(tls.serverKey), cert_chain: readFileSync(tls.serverCert) }],
            true, // mutual TLS: the exporter must present a certificate signed by the CA
          )
        : grpc.ServerCredentials.createInsecure(),
      (err, port) => (err ? reject(err) : resolve(port)),
    ),
  );
  c.close = () => new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
  return c;
}

/** eRPC's tracing block: gRPC to `host:port`, almost no ambient sampling, matchers, detail tier. */
const YAML = (tracing: string) => `
logLevel: warn
metrics: { enabled: false }
database:
  evmJsonRpcCache:
    connectors: []
    policies: []
tracing:
${tracing}
projects:
  - id: main
    networks:
      - architecture: evm
        evm: { chainId: 31337 }
    upstreams:
      - id: anvil
        endpoint: __ANVIL__
        evm: { chainId: 31337 }
`;

const FORCED = `  enabled: true
  endpoint: __COLLECTOR__
  protocol: grpc
  sampleRate: 0.000001
  serviceName: svc-e2e
  detailed: true
  headers:
    x-api-key: collector-secret
  resourceAttributes:
    deployment.environment: e2e
    left.out: ""
  forceTraceMatchers:
    - method: "eth_getBalance|trace_*"
    - network: "evm:1"
      method: "eth_gasPrice"`;

/** No protocol: eRPC's `host:port` endpoint means gRPC. Everything sampled, no detail tier. */
const INFERRED = `  enabled: true
  endpoint: __COLLECTOR__
  sampleRate: 1`;

const ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';

describe('e2e: tracing over OTLP/gRPC to a real gRPC collector (eRPC YAML)', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let collector: Collector;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-otlp-grpc-'));
    [anvil, collector] = await Promise.all([startAnvil(), startCollector(dir)]);
  });
  after(async () => {
    await collector?.close();
    await anvil?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    collector.spans.length = 0;
    collector.metadata.length = 0;
  });

  const fill = (yaml: string) => yaml.replace('__ANVIL__', anvil.url).replace('__COLLECTOR__', `127.0.0.1:${collector.port}`);
  const call = (method: string, params: unknown[]) => ({ jsonrpc: '2.0', id: 1, method, params });

  it('forceTraceMatchers: matched calls are traced at a near-zero sample rate, others not; detailed adds the forward span and params; headers and resource attributes arrive', async () => {
    const svc = await startSvc(parseYaml(fill(YAML(FORCED))) as object);
    try {
      for (const [m, p] of [
        ['eth_getBalance', [ADDRESS, 'latest']],
        ['eth_gasPrice', []], // the second matcher needs network evm:1 too: not forced here
        ['eth_blockNumber', []],
      ] as const) {
        const r = await svc.post('/main/evm/31337', call(m, [...p]));
        expect(r.json?.result, r.text).to.match(/^0x/);
      }
    } finally {
      // Shutting down flushes the batch: every span is exported before close resolves.
      await svc.close();
    }
    const names = collector.spans.map((s) => s.name);
    expect(names).to.include.members(['svc.request', 'eth_getBalance', 'svc.forward', 'upstream eth_getBalance']);
    expect(names).to.not.include('eth_gasPrice');
    expect(names).to.not.include('eth_blockNumber');
    const span = (n: string) => collector.spans.find((s) => s.name === n)!;
    const callSpan = span('eth_getBalance');
    expect(flat(callSpan.attributes)).to.deep.include({ 'rpc.method': 'eth_getBalance', 'svc.network': 'evm:31337', 'svc.force_trace': true });
    expect(flat(callSpan.attributes)['svc.params']).to.equal(JSON.stringify([ADDRESS, 'latest']));
    const forward = span('svc.forward');
    expect(forward.parentSpanId.equals(callSpan.spanId)).to.equal(true);
    const upstream = span('upstream eth_getBalance');
    expect(upstream.parentSpanId.equals(forward.spanId)).to.equal(true);
    expect(String(flat(upstream.attributes)['svc.params'])).to.match(/^\["0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266","(latest|0x[0-9a-f]+)"\]$/); // as sent: interpolated once the head is known
    expect(callSpan.resource).to.deep.include({ 'service.name': 'svc-e2e', 'deployment.environment': 'e2e' });
    expect(callSpan.resource).to.not.have.property('left.out');
    expect(collector.metadata.some((m) => m['x-api-key'] === 'collector-secret')).to.equal(true);
  });

  it('no protocol with a host:port endpoint exports over gRPC (eRPC default); without detailed there is no forward span and no params', async () => {
    const svc = await startSvc(parseYaml(fill(YAML(INFERRED))) as object);
    try {
      const r = await svc.post('/main/evm/31337', call('eth_getBalance', [ADDRESS, 'latest']));
      expect(r.json?.result, r.text).to.match(/^0x/);
    } finally {
      await svc.close();
    }
    const names = collector.spans.map((s) => s.name);
    expect(names).to.include.members(['svc.request', 'eth_getBalance', 'upstream eth_getBalance']);
    expect(names).to.not.include('svc.forward');
    const callSpan = collector.spans.find((s) => s.name === 'eth_getBalance')!;
    expect(flat(callSpan.attributes)).to.not.have.property('svc.params');
    expect(callSpan.resource).to.deep.include({ 'service.name': 'svc' });
  });

  it("tls (eRPC's block): host:port over TLS verified against caFile, with a client certificate for mutual TLS", async () => {
    const pki = makePki(dir);
    const secure = await startCollector(dir, pki);
    try {
      const yaml = YAML(`  enabled: true
  endpoint: 127.0.0.1:${secure.port}
  protocol: grpc
  tls:
    enabled: true
    caFile: ${pki.ca}
    certFile: ${pki.clientCert}
    keyFile: ${pki.clientKey}`).replace('__ANVIL__', anvil.url);
      const svc = await startSvc(parseYaml(yaml) as object);
      try {
        const r = await svc.post('/main/evm/31337', call('eth_getBalance', [ADDRESS, 'latest']));
        expect(r.json?.result, r.text).to.match(/^0x/);
      } finally {
        await svc.close();
      }
      expect(secure.spans.map((s) => s.name)).to.include.members(['svc.request', 'eth_getBalance']);
    } finally {
      await secure.close();
    }
  });

  it('svc validate --print takes the eRPC tracing block as it is, and the print re-validates', async () => {
    await ensureBuilt();
    const run = (args: string[]) => runSvcCli(args, dir);
    writeFileSync(join(dir, 'tracing.yaml'), YAML(FORCED).replace('__ANVIL__', 'http://127.0.0.1:8545').replace('__COLLECTOR__', 'otel-collector:4317'));
    const r = await run(['validate', '--config', 'tracing.yaml', '--print']);
    expect(r.code, r.err).to.equal(0);
    const printed = parseYaml(r.out) as { tracing: Record<string, unknown> };
    expect(printed.tracing).to.deep.include({ endpoint: 'otel-collector:4317', protocol: 'grpc', detailed: true });
    writeFileSync(join(dir, 'printed.yaml'), r.out);
    const again = await run(['validate', '--config', 'printed.yaml', '--print']);
    expect(again.code, again.err).to.equal(0);
    expect(again.out).to.include("# no rewrite: the config is in svc's shape");
  });
});

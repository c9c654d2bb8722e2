/**
 * A throwaway certificate authority for TLS tests (openssl, EC P-256, valid one day): a server
 * certificate for a wildcard name signed by it, and a self-signed one that no test trusts.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** PEM material of a test CA and two server certificates for `*.<domain>`. */
export interface TestPki {
  /** The CA certificate to trust. */
  ca: string;
  /** Key and certificate signed by the CA. */
  signed: { key: string; cert: string };
  /** Key and certificate signed by nobody trusted. */
  untrusted: { key: string; cert: string };
}

/**
 * Creates the CA and certificates.
 * @param domain e.g. `hyper.test` (the certificates cover `*.hyper.test`)
 * @throws Error when openssl is missing (`.ci/run` installs it)
 */
export function makeTestPki(domain: string): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'svc-pki-'));
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  try {
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    ssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=svc test CA');
    writeFileSync(join(dir, 'san.ext'), `subjectAltName=DNS:*.${domain}\n`);
    ssl('req', ...ec, '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', `/CN=*.${domain}`);
    ssl('x509', '-req', '-in', 'srv.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.crt', '-days', '1', '-extfile', 'san.ext');
    ssl(
      'req',
      '-x509',
      ...ec,
      '-keyout',
      'self.key',
      '-out',
      'self.crt',
      '-days',
      '1',
      '-subj',
      `/CN=*.${domain}`,
      '-addext',
      `subjectAltName=DNS:*.${domain}`,
    );
    const read = (f: string) => readFileSync(join(dir, f), 'utf8');
    return { ca: read('ca.crt'), signed: { key: read('srv.key'), cert: read('srv.crt') }, untrusted: { key: read('self.key'), cert: read('self.crt') } };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A PEM certificate and its private key, made by openssl for one test. */
export interface TestCertificate {
  cert: string;
  key: string;
}

/**
 * Makes certificates with the openssl command line (P-256 keys, SHA-256 signatures), in a
 * temporary folder removed at once: a certificate authority for a test's TLS receiver to trust,
 * and client certificates it signs.
 */
export interface CertificateMaker {
  /** A self-signed CA (`CN=<name>`), valid `days` days from now. */
  authority(name: string, days?: number): TestCertificate;
  /**
   * A client certificate for `CN=<commonName>` (extendedKeyUsage clientAuth) signed by `issuer`,
   * valid `days` days from now; self-signed without `issuer`.
   */
  client(commonName: string, options?: { issuer?: TestCertificate; days?: number }): TestCertificate;
  /** A fresh P-256 private key (PEM, PKCS#8), matching no certificate. */
  key(): string;
}

/** The maker; `openssl` must be on PATH. */
export function certificateMaker(): CertificateMaker {
  const inDir = <T>(work: (file: (name: string) => string) => T): T => {
    const dir = mkdtempSync(path.join(tmpdir(), 'test-certs-'));
    try {
      return work((name) => path.join(dir, name));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const newKey = (file: string) => openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file]);

  return {
    authority(name, days = 365) {
      return inDir((file) => {
        newKey(file('ca.key'));
        openssl(['req', '-x509', '-new', '-key', file('ca.key'), '-subj', `/CN=${name}`, '-days', String(days), '-sha256', '-out', file('ca.pem'),
          '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
        return { cert: readFileSync(file('ca.pem'), 'utf8'), key: readFileSync(file('ca.key'), 'utf8') };
      });
    },

    client(commonName, options = {}) {
      return inDir((file) => {
        const days = String(options.days ?? 365);
        newKey(file('client.key'));
        writeFileSync(file('ext.cnf'), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n');
        openssl(['req', '-new', '-key', file('client.key'), '-subj', `/CN=${commonName}`, '-out', file('client.csr')]);
        if (options.issuer) {
          writeFileSync(file('ca.pem'), options.issuer.cert);
          writeFileSync(file('ca.key'), options.issuer.key);
          openssl(['x509', '-req', '-in', file('client.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', days, '-sha256',
            '-extfile', file('ext.cnf'), '-out', file('client.pem')]);
        } else {
          openssl(['x509', '-req', '-in', file('client.csr'), '-key', file('client.key'), '-days', days, '-sha256', '-extfile', file('ext.cnf'), '-out', file('client.pem')]);
        }
        return { cert: readFileSync(file('client.pem'), 'utf8'), key: readFileSync(file('client.key'), 'utf8') };
      });
    },

    key() {
      return inDir((file) => {
        newKey(file('other.key'));
        return readFileSync(file('other.key'), 'utf8');
      });
    },
  };
}

/**
 * Certificates for TLS tests, made with openssl in a temporary directory: a CA, a server
 * certificate it signed for 127.0.0.1 and localhost, and a second CA that signed nothing of
 * ours (the "wrong CA"). `remove()` deletes the directory.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface TestCerts {
  dir: string
  /** PEM files. */
  caFile: string
  certFile: string
  keyFile: string
  wrongCaFile: string
  /** A key that does not belong to `certFile`. */
  otherKeyFile: string
  /** A certificate for the same names and key as `certFile`, signed by the wrong CA (a renewal from another CA). */
  renewedCertFile: string
  ca: string
  remove (): void
}

function openssl (args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] })
}

function makeCa (dir: string, name: string): void {
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${name}`,
    '-keyout', `${name}.key`, '-out', `${name}.pem`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir)
}

/** Makes the certificates (about a second of openssl). */
export function makeTestCerts (): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tls-'))
  try {
    makeCa(dir, 'ca')
    makeCa(dir, 'wrong-ca')
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr'], dir)
    writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n')
    openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'server.ext', '-out', 'server.pem'], dir)
    openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'wrong-ca.pem', '-CAkey', 'wrong-ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'server.ext', '-out', 'renewed.pem'], dir)
    openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'other.key'], dir)
  } catch (err) {
    rmSync(dir, { recursive: true, force: true })
    throw err
  }
  return {
    dir,
    caFile: join(dir, 'ca.pem'),
    certFile: join(dir, 'server.pem'),
    keyFile: join(dir, 'server.key'),
    wrongCaFile: join(dir, 'wrong-ca.pem'),
    otherKeyFile: join(dir, 'other.key'),
    renewedCertFile: join(dir, 'renewed.pem'),
    ca: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    remove: () => rmSync(dir, { recursive: true, force: true })
  }
}

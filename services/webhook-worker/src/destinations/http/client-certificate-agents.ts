import type http from 'node:http';
import https from 'node:https';
import { createConnectionPool } from '../connection-pool';
import type { EgressProxy } from './egress-proxy';

/** An endpoint's client certificate (docs/design.md §14.4) and the pool it is sent from. */
export interface ClientCertificate {
  /** PEM certificate (and chain). */
  cert: string;
  /** PEM private key. */
  key: string;
  /**
   * `<endpoint id>:<fingerprint>`: sockets are pooled per endpoint and certificate, so a socket
   * that presented one endpoint's certificate never carries another's delivery.
   */
  pool: string;
}

export interface ClientCertificateAgents {
  /** The keep-alive agent presenting `certificate`: direct, or tunnelled through `via`. */
  agentFor(certificate: ClientCertificate, via: EgressProxy | undefined): http.Agent;
  /** Destroys every agent and its sockets. */
  close(): void;
}

/**
 * Agents for mutual TLS, one per endpoint, certificate fingerprint and route (direct or through
 * the egress proxy), over the worker's own agent options (keep-alive, the SSRF guard's lookup),
 * kept in the destinations' connection pool. Verification stays on: the default CAs (Node's,
 * plus NODE_EXTRA_CA_CERTS) check the endpoint. When an endpoint's certificate changes, the
 * agent of the old one is destroyed as soon as it is idle.
 */
export function createClientCertificateAgents(agentOptions: https.AgentOptions): ClientCertificateAgents {
  const agents = createConnectionPool<http.Agent>({ idle, destroy: (agent) => agent.destroy() });

  return {
    agentFor(certificate, via) {
      const owner = certificate.pool.slice(0, certificate.pool.indexOf(':'));
      return agents.get(owner, certificate.pool, via ? 'proxy' : 'direct', () => {
        const tls = { cert: certificate.cert, key: certificate.key };
        return via ? via.tunnelWith(tls) : new https.Agent({ ...agentOptions, ...tls });
      });
    },
    close: () => agents.close(),
  };
}

function idle(agent: http.Agent): boolean {
  return Object.keys(agent.sockets).length === 0 && Object.keys(agent.requests).length === 0;
}

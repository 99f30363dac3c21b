import type http from 'node:http';
import https from 'node:https';
import type { EgressProxy } from './egress-proxy';

/** An endpoint's client certificate (docs/design.md §14, revision 4) and the pool it is sent from. */
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
 * Idle agents kept at most; past this the oldest idle ones are destroyed. An agent in use is
 * never destroyed (its requests would die); it goes once idle, at a later creation.
 */
const MAX_IDLE_AGENTS = 256;

/**
 * Agents for mutual TLS, one per endpoint, certificate fingerprint and route (direct or through
 * the egress proxy), over the worker's own agent options (keep-alive, the SSRF guard's lookup).
 * Verification stays on: the default CAs (Node's, plus NODE_EXTRA_CA_CERTS) check the endpoint.
 * When an endpoint's certificate changes, the agent of the old one is destroyed as soon as it is idle.
 */
export function createClientCertificateAgents(agentOptions: https.AgentOptions): ClientCertificateAgents {
  const agents = new Map<string, http.Agent>();

  function sweep(replacing: string): void {
    const endpoint = replacing.slice(0, replacing.indexOf(':') + 1);
    let excess = agents.size - MAX_IDLE_AGENTS;
    for (const [name, agent] of agents) {
      if (!idle(agent)) continue;
      const superseded = name.startsWith(endpoint) && !name.startsWith(`${replacing}/`);
      if (!superseded && excess <= 0) continue;
      agent.destroy();
      agents.delete(name);
      excess -= 1;
    }
  }

  return {
    agentFor(certificate, via) {
      const name = `${certificate.pool}/${via ? 'proxy' : 'direct'}`;
      const found = agents.get(name);
      if (found) {
        // Most recently used last: the sweep drops from the front.
        agents.delete(name);
        agents.set(name, found);
        return found;
      }
      sweep(certificate.pool);
      const tls = { cert: certificate.cert, key: certificate.key };
      const agent = via ? via.tunnelWith(tls) : new https.Agent({ ...agentOptions, ...tls });
      agents.set(name, agent);
      return agent;
    },
    close() {
      for (const agent of agents.values()) agent.destroy();
      agents.clear();
    },
  };
}

function idle(agent: http.Agent): boolean {
  return Object.keys(agent.sockets).length === 0 && Object.keys(agent.requests).length === 0;
}

import type http from 'node:http';
import { BlockList, isIP, type Socket } from 'node:net';
import { HttpProxyAgent } from 'http-proxy-agent';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { EgressProxyAnswerError } from './errors';

/** The operator's egress proxy (docs/design.md §14.2: WEBHOOK_PROXY_URL, WEBHOOK_NO_PROXY). */
export interface EgressProxyOptions {
  /** `http://[user:password@]host:port` of a forward proxy. */
  url: string;
  /**
   * Targets sent directly: `*` (everything), hostnames (`example.com` also covers its
   * subdomains, as curl reads NO_PROXY; a leading dot is ignored), IP addresses and CIDRs
   * (matched against a URL's IP-literal host).
   */
  noProxy: readonly string[];
  /** Sockets per proxy, as for direct targets. */
  maxSockets: number;
  /** TCP keep-alive delay of the pooled sockets, ms; default Node's (1000). The http sender passes axios's 60 s. */
  keepAliveMsecs?: number;
}

export interface EgressProxy {
  /** True when `url` goes through the proxy, false when WEBHOOK_NO_PROXY sends it directly. */
  applies(url: URL): boolean;
  /** Sends http targets to the proxy in absolute form (RFC 9112 §3.2.2). */
  httpAgent: http.Agent;
  /**
   * Tunnels https targets through the proxy with CONNECT (RFC 9110 §9.3.6); TLS stays end to
   * end. A CONNECT answered otherwise than 200 fails the request with EgressProxyAnswerError.
   */
  httpsAgent: http.Agent;
  /**
   * A tunnelling agent of its own that presents `certificate` for mutual TLS inside the tunnel,
   * to the target only (the CONNECT to the proxy carries none). The caller owns it (destroy).
   */
  tunnelWith(certificate: { cert: string; key: string }): http.Agent;
  /** Drops both shared agents' pooled sockets. */
  close(): void;
}

/**
 * Agents that send deliveries through the operator's forward proxy, and the WEBHOOK_NO_PROXY
 * rule that keeps some targets direct. The proxy's credentials (`user:password@` in the URL)
 * go in Proxy-Authorization and never into a log or an attempt's error.
 *
 * @throws TypeError for a URL that does not parse (shared/config validates it first)
 */
export function createEgressProxy(options: EgressProxyOptions): EgressProxy {
  const proxyUrl = new URL(options.url);
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets, ...(options.keepAliveMsecs ? { keepAliveMsecs: options.keepAliveMsecs } : {}) };
  const httpAgent = new HttpProxyAgent(proxyUrl, agentOptions);
  const httpsAgent = new TunnelAgent(proxyUrl, agentOptions);
  const direct = noProxyRule(options.noProxy);
  return {
    applies: (url) => !direct(url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase()),
    httpAgent,
    httpsAgent,
    tunnelWith: (certificate) => new TunnelAgent(proxyUrl, agentOptions, certificate),
    close() {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

/**
 * https-proxy-agent hands a refused CONNECT's answer to the request as if the target had sent
 * it; this one fails the request instead, so the proxy's status and body are never taken for
 * the endpoint's (docs/design.md §14.3). With a client certificate, it goes into the
 * TLS handshake with the target inside the tunnel (https-proxy-agent upgrades the tunnel with
 * the request's options), never into the connection to the proxy (its constructor options).
 */
class TunnelAgent extends HttpsProxyAgent<string> {
  constructor(
    proxy: URL,
    options: ConstructorParameters<typeof HttpsProxyAgent<string>>[1],
    private readonly certificate?: { cert: string; key: string },
  ) {
    super(proxy, options);
  }

  override async connect(request: http.ClientRequest, options: Parameters<HttpsProxyAgent<string>['connect']>[1]): Promise<Socket> {
    let answer: number | undefined;
    // https-proxy-agent emits the CONNECT's answer on the request before it returns.
    request.once('proxyConnect', (connect: { statusCode: number }) => {
      answer = connect.statusCode;
    });
    const tls = this.certificate ? { ...options, cert: this.certificate.cert, key: this.certificate.key } : options;
    const socket = await super.connect(request, tls);
    if (answer === undefined || answer === 200) return socket;
    socket.destroy();
    throw new EgressProxyAnswerError(answer);
  }
}

/** True for a host WEBHOOK_NO_PROXY sends directly. */
function noProxyRule(entries: readonly string[]): (host: string) => boolean {
  const suffixes: string[] = [];
  const addresses = new BlockList();
  let everything = false;
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase();
    if (entry === '*') everything = true;
    const [address, bits] = entry.split('/');
    const family = isIP(address);
    if (family !== 0) addresses.addSubnet(address, bits === undefined ? (family === 4 ? 32 : 128) : Number(bits), family === 4 ? 'ipv4' : 'ipv6');
    else if (entry !== '' && entry !== '*') suffixes.push(entry.replace(/^\./, ''));
  }
  return (host) => {
    if (everything) return true;
    const family = isIP(host);
    if (family !== 0) return addresses.check(host, family === 4 ? 'ipv4' : 'ipv6');
    return suffixes.some((suffix) => host === suffix || host.endsWith(`.${suffix}`));
  };
}

import { startPeerProcess } from './peer-process';

/** One request as the proxy received it, before it authenticated or forwarded it. */
export interface ProxiedRequest {
  /** `CONNECT` for an https tunnel, else the forwarded request's method. */
  method: string;
  /** The request target: absolute form (`http://host:port/path`, RFC 9112 §3.2.2) or, for CONNECT, authority form (`host:port`). */
  target: string;
  /** The Proxy-Authorization header as sent, or null. */
  proxyAuthorization: string | null;
}

/** A real forward proxy (the `proxy` package) in a process of its own on 127.0.0.1. */
export interface ForwardProxy {
  /** `http://127.0.0.1:<port>`, without credentials. */
  readonly url: string;
  readonly port: number;
  /** Every request so far, oldest first. */
  readonly requests: ProxiedRequest[];
  close(): Promise<void>;
}

/**
 * Starts a {@link ForwardProxy}.
 *
 * @param options - `credentials` (`user:password`): the proxy then answers 407 to requests
 *   without them as Basic Proxy-Authorization (RFC 9110 §11.7.2); `policy`: CONNECT targets
 *   (`host:port`) the proxy answers with the given status and a body of its own instead of
 *   tunnelling, as an egress policy does
 */
export async function startForwardProxy(options: { credentials?: string; policy?: Record<string, number> } = {}): Promise<ForwardProxy> {
  const requests: ProxiedRequest[] = [];
  const env: Record<string, string> = {
    ...(options.credentials ? { PROXY_CREDENTIALS: options.credentials } : {}),
    ...(options.policy ? { PROXY_POLICY: JSON.stringify(options.policy) } : {}),
  };
  const peer = await startPeerProcess<ProxiedRequest>('forward-proxy-process.mjs', env, (request) => requests.push(request));
  return { url: `http://127.0.0.1:${peer.port}`, port: peer.port, requests, close: () => peer.close() };
}

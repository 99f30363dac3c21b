import axios, { type AxiosError, type AxiosInstance } from 'axios';
import axiosRetry from 'axios-retry';

/** Transport errors worth a quick retry: the connection was refused or reset before an answer. */
const RETRYABLE_CODES = new Set(['ECONNRESET', 'ECONNREFUSED']);

/**
 * Whether axios-retry may try again: only a refused or reset connection with no HTTP answer.
 * Never an HTTP status (a 5xx is the endpoint's answer and belongs to the delivery schedule),
 * never a timeout (the endpoint may still be processing).
 */
export function isConnectionFailure(error: AxiosError): boolean {
  return !error.response && error.code !== undefined && RETRYABLE_CODES.has(error.code);
}

/**
 * The axios instance webhooks are sent with: every status resolves (callers decide what a
 * non-2xx means), redirects are not followed (a webhook answer is final, and following one
 * would reach a target nobody configured), and a refused or reset connection is retried at
 * most twice, 100 ms then 200 ms later. A retried POST carries the same webhook-id, so
 * receivers dedupe it.
 */
export function createWebhookHttpClient(): AxiosInstance {
  const client = axios.create({ validateStatus: () => true, maxRedirects: 0 });
  axiosRetry(client, {
    retries: 2,
    retryCondition: isConnectionFailure,
    retryDelay: (retryCount) => retryCount * 100,
    shouldResetTimeout: true,
  });
  return client;
}

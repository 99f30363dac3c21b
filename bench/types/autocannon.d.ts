// The subset of autocannon's programmatic API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  import type { IncomingHttpHeaders } from 'node:http';

  interface RawRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
  }

  interface RequestSpec extends RawRequest {
    setupRequest?: (request: RawRequest, context: Record<string, unknown>) => RawRequest;
  }

  interface Options {
    url: string;
    connections?: number;
    duration?: number;
    amount?: number;
    overallRate?: number;
    timeout?: number;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    requests?: RequestSpec[];
  }

  interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
  }

  interface Result {
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    requests: Histogram;
    latency: Histogram;
    throughput: Histogram;
  }

  function autocannon(options: Options): Promise<Result> & { stop(): void };
  namespace autocannon {
    export type { Options, Result, RawRequest, RequestSpec, IncomingHttpHeaders };
  }
  export = autocannon;
}

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { AppDeps, buildApp } from '../../../services/api/src/app';
import type { Config } from '../../../shared/config';
import { createDatabase, Database } from '../../../shared/db';
import { createTestEnvironment, TestEnvironment } from '../../support/environment';

export interface ApiRequest {
  method?: string;
  url: string;
  headers?: Record<string, string>;
  /** A plain object or array is sent as JSON; strings, buffers and FormData as they are. */
  payload?: unknown;
}

export interface ApiResponse {
  statusCode: number;
  /** Lowercase header names. */
  headers: Record<string, string>;
  body: string;
  json(): any;
}

/** A running api on a real port (light-my-request's inject cannot load under jest on Node 20). */
export interface ApiClient {
  app: FastifyInstance;
  baseUrl: string;
  request(request: ApiRequest): Promise<ApiResponse>;
}

/** One test file's database, Redis prefix, upload folder and a database handle for factories. */
export interface ApiHarness {
  env: TestEnvironment;
  db: Database;
  uploadDir: string;
  /** Builds an api on this environment and listens on a free port; closed by `close()`. */
  start(layout: 'a' | 'b', overrides?: Partial<Config>, deps?: AppDeps): Promise<ApiClient>;
  close(): Promise<void>;
}

export async function createApiHarness(env: Record<string, string> = {}): Promise<ApiHarness> {
  const testEnv = await createTestEnvironment(env);
  const db = createDatabase(testEnv.databaseUrl, { poolMax: 2 });
  const uploadDir = mkdtempSync(path.join(tmpdir(), 'api-uploads-'));
  const apps: FastifyInstance[] = [];
  return {
    env: testEnv,
    db,
    uploadDir,
    async start(layout, overrides = {}, deps = {}) {
      const app = buildApp({ ...testEnv.config, apiLayout: layout, uploadDir, ...overrides }, deps);
      apps.push(app);
      await app.listen({ host: '127.0.0.1', port: 0 });
      const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      return { app, baseUrl, request: (request) => send(baseUrl, request) };
    },
    async close() {
      await Promise.all(apps.map((app) => app.close()));
      await db.close();
      await testEnv.cleanup();
      rmSync(uploadDir, { recursive: true, force: true });
    },
  };
}

async function send(baseUrl: string, { method = 'GET', url, headers = {}, payload }: ApiRequest): Promise<ApiResponse> {
  const isJson = payload !== undefined && payload !== null && typeof payload === 'object' && !(payload instanceof FormData) && !Buffer.isBuffer(payload);
  const response = await fetch(baseUrl + url, {
    method,
    headers: isJson ? { 'content-type': 'application/json', ...headers } : headers,
    body: isJson ? JSON.stringify(payload) : (payload as string | Buffer | FormData | undefined),
  });
  const body = await response.text();
  return {
    statusCode: response.status,
    headers: Object.fromEntries(response.headers.entries()),
    body,
    json: () => JSON.parse(body),
  };
}

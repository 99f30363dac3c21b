import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { SERVICES } from '../../scripts/services';
import { CONFIG_VARIABLES } from '../../shared/config';

interface ComposeService {
  build?: unknown;
  image?: string;
  pull_policy?: string;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  entrypoint?: string[];
}

const root = path.join(__dirname, '..', '..');
const compose = parse(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, ComposeService>;
};
const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
const packageScripts = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
const APP_SERVICES = [...SERVICES.map((service) => service.name), 'migrate'];

describe('docker-compose.yml and npm start run the same system', () => {
  it.each(SERVICES.map((service) => [service.name, service] as const))(
    'when compose runs %s, then it uses the command and variables npm start uses',
    (name, service) => {
      const composed = compose.services[name];
      expect(composed).toBeDefined();
      expect(composed.command?.join(' ')).toBe(service.command);
      expect(composed.environment).toMatchObject(service.env);
      if (service.scalable) expect(composed.ports).toBeUndefined();
      // Loopback unless the operator opens it: the default stack seeds public credentials.
      else expect(composed.ports).toEqual([`\${PUBLISH_HOST:-127.0.0.1}:${service.port}:${service.port}`]);
      expect(composed.depends_on).toMatchObject({
        postgres: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
        migrate: { condition: 'service_completed_successfully' },
      });
    },
  );

  it.each([
    ['start:api', 'api-a'],
    ['start:worker', 'webhook-worker'],
    ['start:receiver', 'receiver'],
  ])('when `npm run %s` starts one service, then it runs the command (node options included) npm start uses', (script, name) => {
    expect(packageScripts[script]).toBe(SERVICES.find((service) => service.name === name)?.command);
  });

  it('when compose or the image runs a service, then it listens on every interface of its container (HOST=0.0.0.0), published on loopback only', () => {
    for (const service of SERVICES) expect({ service: service.name, host: compose.services[service.name].environment?.HOST }).toEqual({ service: service.name, host: '0.0.0.0' });
    expect(dockerfile).toMatch(/^ENV .*\bHOST=0\.0\.0\.0\b/m);
  });

  it('when compose starts, then every variable it sets is one the services read', () => {
    const known = new Set([...CONFIG_VARIABLES, 'SEED_ENDPOINT_URL', 'NPM_CONFIG_UPDATE_NOTIFIER']);
    for (const name of APP_SERVICES) {
      const unknown = Object.keys(compose.services[name].environment ?? {}).filter((variable) => !known.has(variable));
      expect({ service: name, unknown }).toEqual({ service: name, unknown: [] });
    }
  });

  it('when compose starts, then migrations and seeds run once before the services, with the seed endpoint on the receiver', () => {
    const migrate = compose.services.migrate;
    expect(migrate.command?.join(' ')).toMatch(/create-database\.js --wait-seconds \d+ && npm run db:migrate && npm run db:seed/);
    expect(migrate.environment?.SEED_ENDPOINT_URL).toBe('http://receiver:3002/webhooks/posts');
  });

  it('when compose starts Redis, then it never evicts queue keys and keeps an append-only file', () => {
    const command = compose.services.redis.command?.join(' ');
    expect(command).toContain('--maxmemory-policy noeviction');
    expect(command).toContain('--appendonly yes');
  });
});

describe('docker-compose.yml starts every time', () => {
  it('when PostgreSQL initialises a fresh volume, then it counts as healthy only once it answers over TCP', () => {
    const test = compose.services.postgres.healthcheck?.test.join(' ');
    expect(test).toMatch(/pg_isready -h 127\.0\.0\.1 /);
  });

  it.each(SERVICES.map((service) => [service.name, service.port] as const))(
    'when %s runs, then its healthcheck asks its /ready on port %i with node (the image has no curl)',
    (name, port) => {
      const test = compose.services[name].healthcheck?.test ?? [];
      expect(test.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
      expect(test[3]).toContain(`fetch('http://127.0.0.1:${port}/ready')`);
    },
  );

  it('when api-a, api-b and the receiver write or delete images, then they share one uploads volume', () => {
    for (const name of ['api-a', 'api-b', 'receiver']) {
      expect({ name, volumes: compose.services[name].volumes }).toEqual({ name, volumes: ['uploads:/app/storage/uploads'] });
    }
  });

  it('when compose builds, then one service builds the image and every app service runs that image without pulling it', () => {
    const builders = Object.entries(compose.services).filter(([, service]) => service.build !== undefined).map(([name]) => name);
    expect(builders).toEqual(['migrate']);
    for (const name of APP_SERVICES) expect({ name, image: compose.services[name].image }).toEqual({ name, image: 'posts-webhooks:local' });
    for (const service of SERVICES) expect({ name: service.name, pull: compose.services[service.name].pull_policy }).toEqual({ name: service.name, pull: 'never' });
  });

  it('when the image runs npm, then it never asks the registry for an update notice, and it names no single port', () => {
    expect(dockerfile).toMatch(/ENV NODE_ENV=production NPM_CONFIG_UPDATE_NOTIFIER=false/);
    expect(compose.services.migrate.environment?.NPM_CONFIG_UPDATE_NOTIFIER).toBe('false');
    expect(dockerfile).not.toMatch(/^EXPOSE /m);
  });

  it('when compose runs, then PostgreSQL and Redis publish no port on the host', () => {
    expect(compose.services.postgres.ports).toBeUndefined();
    expect(compose.services.redis.ports).toBeUndefined();
  });

  it('when the worker delivers in compose, then the SSRF guard is on and only the receiver is allowed as a private host', () => {
    for (const name of APP_SERVICES) {
      const environment = compose.services[name].environment ?? {};
      expect({ name, guard: environment.WEBHOOK_BLOCK_PRIVATE, allow: environment.WEBHOOK_PRIVATE_ALLOWLIST }).toEqual({
        name,
        guard: undefined,
        allow: 'receiver',
      });
      expect(environment.NODE_ENV).toBe('production');
    }
  });
});

describe('docker-compose.ha.yml layers Sentinels and a standby over the main file', () => {
  const ha = parse(readFileSync(path.join(root, 'docker-compose.ha.yml'), 'utf8'), { merge: true }) as { services: Record<string, ComposeService> };

  it('when the HA file runs, then every app service reaches Redis through the three Sentinels by a name they monitor', () => {
    const sentinelNames = ['sentinel-1', 'sentinel-2', 'sentinel-3'];
    for (const name of sentinelNames) expect(ha.services[name].command?.join(' ')).toContain('sentinel monitor pwprimary redis 6379 2');
    for (const service of SERVICES) {
      const environment = ha.services[service.name].environment ?? {};
      expect({ name: service.name, sentinels: environment.REDIS_SENTINELS, primary: environment.REDIS_SENTINEL_NAME }).toEqual({
        name: service.name,
        sentinels: sentinelNames.map((host) => `${host}:26379`).join(','),
        primary: 'pwprimary',
      });
      expect(Object.keys(environment).filter((variable) => !CONFIG_VARIABLES.includes(variable))).toEqual([]);
      for (const sentinel of sentinelNames) expect(ha.services[service.name].depends_on?.[sentinel]).toEqual({ condition: 'service_healthy' });
    }
  });

  it('when the HA file runs, then the Redis replica keeps jobs as the primary does and PostgreSQL streams to a standby', () => {
    const replica = ha.services['redis-replica'].command?.join(' ');
    expect(replica).toContain('--maxmemory-policy noeviction');
    expect(replica).toContain('--replicaof redis 6379');
    expect(ha.services.redis.command?.join(' ')).toContain('--appendonly yes');
    expect(ha.services.postgres.command?.join(' ')).toContain('wal_level=replica');
    expect(ha.services['postgres-standby'].entrypoint?.join(' ')).toContain('pg_basebackup -h postgres');
  });
});

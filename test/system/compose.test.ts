import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { SERVICES } from '../../scripts/services';
import { CONFIG_VARIABLES } from '../../shared/config';

interface ComposeService {
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
}

const compose = parse(readFileSync(path.join(__dirname, '..', '..', 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, ComposeService>;
};

describe('docker-compose.yml and npm start run the same system', () => {
  it.each(SERVICES.map((service) => [service.name, service] as const))(
    'when compose runs %s, then it uses the command and variables npm start uses',
    (name, service) => {
      const composed = compose.services[name];
      expect(composed).toBeDefined();
      expect(composed.command?.join(' ')).toBe(service.command);
      expect(composed.environment).toMatchObject(service.env);
      if (service.scalable) expect(composed.ports).toBeUndefined();
      else expect(composed.ports).toEqual([`${service.port}:${service.port}`]);
      expect(composed.depends_on).toMatchObject({
        postgres: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
        migrate: { condition: 'service_completed_successfully' },
      });
    },
  );

  it('when compose starts, then every variable it sets is one the services read', () => {
    const known = new Set([...CONFIG_VARIABLES, 'SEED_ENDPOINT_URL']);
    for (const name of [...SERVICES.map((service) => service.name), 'migrate']) {
      const unknown = Object.keys(compose.services[name].environment ?? {}).filter((variable) => !known.has(variable));
      expect({ service: name, unknown }).toEqual({ service: name, unknown: [] });
    }
  });

  it('when compose starts, then migrations and seeds run once before the services, with the seed endpoint on the receiver', () => {
    const migrate = compose.services.migrate;
    expect(migrate.command?.join(' ')).toMatch(/npm run db:migrate && npm run db:seed/);
    expect(migrate.environment?.SEED_ENDPOINT_URL).toBe('http://receiver:3002/webhooks/posts');
  });

  it('when compose starts Redis, then it never evicts queue keys and keeps an append-only file', () => {
    const command = compose.services.redis.command?.join(' ');
    expect(command).toContain('--maxmemory-policy noeviction');
    expect(command).toContain('--appendonly yes');
  });
});

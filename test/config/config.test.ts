import { ConfigError, loadConfig } from '../../shared/config';

/** The message of the ConfigError that loadConfig throws for `env`, as a process prints it at start. */
function startupError(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error('loadConfig accepted the environment');
}

describe('configuration (docs/design.md §2)', () => {
  it('when nothing is set, then the designed defaults apply and each dev default secret is warned about', () => {
    const config = loadConfig({}, 'api');

    expect(config).toMatchObject({
      databaseUrl: 'postgres://postgres:postgres@127.0.0.1:5432/posts',
      redisUrl: 'redis://127.0.0.1:6379',
      apiLayout: 'a',
      port: 3000,
      appUrl: 'http://localhost:3000',
      webhookSalt: 'app.webhook.salt',
      webhookTimeoutMs: 15000,
      webhookRetrySchedule: [5, 300, 1800, 7200, 18000, 36000, 36000],
      webhookBlockPrivate: false,
      workerConcurrency: 50,
      quotaPeriodS: 86400,
      uploadDir: './storage/uploads',
      receiverToleranceS: 300,
      logLevel: 'info',
      webhookQueuePartitions: 1,
      requestTimeoutMs: 30000,
    });
    expect(config.warnings).toEqual(['APP_KEY and RECEIVER_SECRET not set: using public development defaults. Never do this in production.']);
    expect(loadConfig({}, 'receiver').port).toBe(3002);
  });

  it('when HOST is not set, then the services listen on 127.0.0.1 outside production and on every interface in production', () => {
    // Outside production the public development credentials are seeded and the SSRF guard is off (docs/design.md §2).
    expect(loadConfig({}, 'api').host).toBe('127.0.0.1');
    expect(loadConfig({ NODE_ENV: 'development' }, 'receiver').host).toBe('127.0.0.1');
    expect(loadConfig({ NODE_ENV: 'test' }, 'worker').host).toBe('127.0.0.1');
    expect(loadConfig({ NODE_ENV: 'production', APP_KEY: 'a-production-app-key', RECEIVER_SECRET: 'a-receiver-secret' }, 'api').host).toBe('0.0.0.0');
  });

  it('when HOST is set, then it wins in and outside production', () => {
    expect(loadConfig({ HOST: '0.0.0.0' }, 'api').host).toBe('0.0.0.0');
    expect(loadConfig({ HOST: '::1' }, 'receiver').host).toBe('::1');
    expect(loadConfig({ NODE_ENV: 'production', APP_KEY: 'a-production-app-key', RECEIVER_SECRET: 'a-receiver-secret', HOST: '10.1.2.3' }, 'api').host).toBe('10.1.2.3');
  });

  it.each([
    ['API_LAYOUT', 'c'],
    ['PORT', 'eighty'],
    ['DATABASE_URL', 'mysql://localhost/posts'],
    ['REDIS_URL', 'not a url'],
    ['WEBHOOK_RETRY_SCHEDULE', '5,soon'],
    ['WORKER_CONCURRENCY', '0'],
    ['LOG_LEVEL', 'loud'],
    ['WEBHOOK_QUEUE_PARTITIONS', '0'],
    ['WEBHOOK_QUEUE_PARTITIONS', '65'],
    ['WEBHOOK_QUEUE_PARTITIONS', 'many'],
    ['REQUEST_TIMEOUT_MS', '999'],
    ['REQUEST_TIMEOUT_MS', 'soon'],
  ])('when %s is %j, then start-up fails with an error naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^Invalid environment variable ${name}:`));
  });

  it('when NODE_ENV is production, then APP_KEY and RECEIVER_SECRET are required and the SSRF guard is on', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', RECEIVER_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' })).toThrow(
      'Missing environment variable APP_KEY',
    );
    expect(() => loadConfig({ NODE_ENV: 'production', APP_KEY: 'a-production-key-0123456789' })).toThrow(
      'Missing environment variable RECEIVER_SECRET',
    );
    const config = loadConfig({
      NODE_ENV: 'production',
      APP_KEY: 'a-production-key-0123456789',
      RECEIVER_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    });
    expect(config).toMatchObject({ webhookBlockPrivate: true, warnings: [] });
  });

  it('when WEBHOOK_PROXY_URL and WEBHOOK_NO_PROXY are set, then the proxy URL is kept with its credentials and the entries are lower-cased', () => {
    const config = loadConfig({ WEBHOOK_PROXY_URL: 'http://egress:p%40ss@Proxy.Internal:3128/', WEBHOOK_NO_PROXY: ' .Internal.Example, 10.0.0.0/8 ,fd00::1,*' });

    expect(config.webhookProxyUrl).toBe('http://egress:p%40ss@proxy.internal:3128');
    expect(config.webhookNoProxy).toEqual(['.internal.example', '10.0.0.0/8', 'fd00::1', '*']);
    expect(loadConfig({})).toMatchObject({ webhookProxyUrl: undefined, webhookNoProxy: [] });
  });

  it.each([
    ['https://proxy.internal:3128', 'it must be an http:// URL (https:// and socks proxies are not supported)'],
    ['socks5://proxy.internal:1080', 'it must be an http:// URL (https:// and socks proxies are not supported)'],
    ['proxy.internal:3128', 'it must be an http:// URL (https:// and socks proxies are not supported)'],
    ['http//proxy', 'it is not a URL; expected http://[user:password@]host:port'],
    ['http://egress:hunter22@proxy.internal:3128/route', 'it must not have a path, query or fragment'],
  ])('when WEBHOOK_PROXY_URL is %j, then start-up fails naming it, and the message never repeats a password', (value, reason) => {
    expect(startupError({ WEBHOOK_PROXY_URL: value })).toBe(
      `Invalid environment variable WEBHOOK_PROXY_URL: "WEBHOOK_PROXY_URL" failed custom validation because ${reason}`,
    );
  });

  it.each([
    ['hooks.example:8443', 'hooks.example:8443 is neither *, a hostname, an IP address nor a CIDR'],
    ['10.0.0.0/33', '10.0.0.0/33 is not a CIDR'],
    ['internal.example, under_score.example', 'under_score.example is neither *, a hostname, an IP address nor a CIDR'],
  ])('when WEBHOOK_NO_PROXY is %j, then start-up fails naming it and the bad entry', (value, reason) => {
    expect(startupError({ WEBHOOK_NO_PROXY: value })).toBe(
      `Invalid environment variable WEBHOOK_NO_PROXY: "WEBHOOK_NO_PROXY" failed custom validation because ${reason}`,
    );
  });

  it('when a variable is set but empty, as compose files leave them, then its default applies', () => {
    expect(loadConfig({ API_LAYOUT: '', PORT: '' }, 'api')).toMatchObject({ apiLayout: 'a', port: 3000 });
  });

  describe('REDIS_PREFIX on a Redis Cluster (docs/design.md §13.1)', () => {
    const cluster = { REDIS_CLUSTER_NODES: '127.0.0.1:7000,127.0.0.1:7001' };

    it('when the queue has one partition, then the prefix must be a hash tag', () => {
      expect(loadConfig({ ...cluster, REDIS_PREFIX: '{pw}' }).webhookQueuePartitions).toBe(1);
      expect(() => loadConfig({ ...cluster, REDIS_PREFIX: 'pw' })).toThrow(/^Invalid environment variable REDIS_PREFIX: .*hash tag such as \{pw\}/);
    });

    it('when the queue has several partitions, then the prefix must have no braces', () => {
      expect(loadConfig({ ...cluster, REDIS_PREFIX: 'pw', WEBHOOK_QUEUE_PARTITIONS: '12' }).webhookQueuePartitions).toBe(12);
      expect(() => loadConfig({ ...cluster, REDIS_PREFIX: '{pw}', WEBHOOK_QUEUE_PARTITIONS: '12' })).toThrow(
        /^Invalid environment variable REDIS_PREFIX: .*WEBHOOK_QUEUE_PARTITIONS=12 it must have no braces/,
      );
    });

    it('when there is no cluster, then any prefix goes with any count', () => {
      expect(loadConfig({ REDIS_PREFIX: '{pw}', WEBHOOK_QUEUE_PARTITIONS: '64' }).webhookQueuePartitions).toBe(64);
      expect(loadConfig({ REDIS_PREFIX: 'pw', WEBHOOK_QUEUE_PARTITIONS: '1' }).redisPrefix).toBe('pw');
    });
  });
});

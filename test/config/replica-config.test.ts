import { ConfigError, loadConfig } from '../../shared/config';

describe('read replica configuration (docs/design.md §2, §13.3)', () => {
  it('when nothing is set, then there is no replica and REPLICA_MAX_LAG_S is 5', () => {
    expect(loadConfig({})).toMatchObject({ databaseReplicaUrl: undefined, replicaMaxLagS: 5 });
  });

  it('when both are set, then the replica URL and the lag bound are kept', () => {
    const config = loadConfig({ DATABASE_REPLICA_URL: 'postgres://reader@replica.internal:5432/posts', REPLICA_MAX_LAG_S: '2.5' });
    expect(config).toMatchObject({ databaseReplicaUrl: 'postgres://reader@replica.internal:5432/posts', replicaMaxLagS: 2.5 });
  });

  it.each([
    ['DATABASE_REPLICA_URL', 'mysql://replica/posts'],
    ['DATABASE_REPLICA_URL', 'replica:5432'],
    ['REPLICA_MAX_LAG_S', '-1'],
    ['REPLICA_MAX_LAG_S', 'soon'],
  ])('when %s is %j, then start-up fails with an error naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^Invalid environment variable ${name}:`));
  });
});

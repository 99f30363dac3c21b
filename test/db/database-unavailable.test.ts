import { ConnectionError, DatabaseError } from 'sequelize';
import { isDatabaseUnavailable, StandbyReachedError } from '../../shared/db';
import { postponesAttempt } from '../../services/webhook-worker/src/delivery-store';

/** A statement's failure as Sequelize and the raw-query helper report it: node-postgres' error inside a DatabaseError. */
function statementError(message: string, code?: string): DatabaseError {
  return new DatabaseError(Object.assign(new Error(message), { code, sql: 'SELECT 1', parameters: [] }));
}

/** No connection could be made: Sequelize's ConnectionError around node-postgres' error. */
function connectError(message: string, code: string): ConnectionError {
  return new ConnectionError(Object.assign(new Error(message), { code }));
}

describe('database errors: an outage or a bad statement', () => {
  it.each([
    ['a socket reset mid-query', statementError('read ECONNRESET', 'ECONNRESET')],
    ['a connection closed mid-query', statementError('Client has encountered a connection error and is not queryable')],
    ['an idle session ended by the server', statementError('terminating connection due to idle-session timeout', '57P05')],
    ['a shutdown', statementError('terminating connection due to administrator command', '57P01')],
    ['a write reaching a standby (read-only transaction)', statementError('cannot execute INSERT in a read-only transaction', '25006')],
    ['a new connection reaching a standby', new ConnectionError(new StandbyReachedError())],
    ['connection refused', connectError('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
  ])('when %s, then PostgreSQL counts as away: the api answers 503 and the worker postpones', (_, error) => {
    expect(isDatabaseUnavailable(error)).toBe(true);
    expect(postponesAttempt(error)).toBe(true);
  });

  it('when a statement itself is wrong, then it is no outage for either', () => {
    const error = statementError('division by zero', '22012');
    expect(isDatabaseUnavailable(error)).toBe(false);
    expect(postponesAttempt(error)).toBe(false);
  });

  it('when the server refuses the credentials, then the api reports a misconfiguration and the worker waits for it to be fixed', () => {
    const error = connectError('password authentication failed for user "posts"', '28P01');
    expect(isDatabaseUnavailable(error)).toBe(false);
    expect(postponesAttempt(error)).toBe(true);
  });
});

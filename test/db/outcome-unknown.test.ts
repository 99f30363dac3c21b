import { ConnectionError, DatabaseError } from 'sequelize';
import { isOutcomeUnknown, isTransactionConflict } from '../../shared/db';

/** A statement's failure as Sequelize and the raw-query helper report it: node-postgres' error inside a DatabaseError. */
function statementError(message: string, code?: string): DatabaseError {
  return new DatabaseError(Object.assign(new Error(message), { code, sql: 'COMMIT', parameters: [] }));
}

/** No connection could be made: Sequelize's ConnectionError around node-postgres' error. */
function connectError(message: string, code: string): ConnectionError {
  return new ConnectionError(Object.assign(new Error(message), { code }));
}

/** docs/design.md §12.1: only a failure known to have committed nothing frees an Idempotency-Key. */
describe('whether a failed write may have committed', () => {
  it.each([
    ['the connection ended mid-statement', statementError('Connection terminated unexpectedly')],
    ['a socket reset mid-statement', statementError('read ECONNRESET', 'ECONNRESET')],
    ['a connection closed mid-statement', statementError('Client has encountered a connection error and is not queryable')],
    ['a read timeout', statementError('Query read timeout')],
    ['the server shut down mid-statement', statementError('terminating connection due to administrator command', '57P01')],
    ['a connection failure reported by the server', statementError('connection failure', '08006')],
  ])('when %s, then its outcome is unknown', (_, error) => {
    expect(isOutcomeUnknown(error)).toBe(true);
  });

  it.each([
    ['the connection was refused', connectError('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['the pool had no connection in time', connectError('timeout exceeded when trying to connect', 'ETIMEDOUT')],
    ['the server refused the connection', statementError('the database system is starting up', '57P03')],
    ['the statement was refused', statementError('duplicate key value violates unique constraint', '23505')],
    ['COMMIT was refused', statementError('could not serialize access due to concurrent update', '40001')],
    ['something else failed', new TypeError('cannot read properties of undefined')],
    ['a Redis connection was closed', new Error('Connection is closed.')],
  ])('when %s, then nothing was committed', (_, error) => {
    expect(isOutcomeUnknown(error)).toBe(false);
  });
});

/** docs/design.md §13.3: a record that lost to another transaction committed nothing and runs again. */
describe('whether a failed transaction lost a conflict with another', () => {
  it.each([
    ['a deadlock', statementError('deadlock detected', '40P01')],
    ['a serialization failure', statementError('could not serialize access due to concurrent update', '40001')],
    ['a deadlock wrapped as a cause', new Error('recording the attempt failed', { cause: statementError('deadlock detected', '40P01') })],
  ])('when %s, then it is a conflict', (_, error) => {
    expect(isTransactionConflict(error)).toBe(true);
  });

  it.each([
    ['a unique violation', statementError('duplicate key value violates unique constraint', '23505')],
    ['the connection ended mid-statement', statementError('Connection terminated unexpectedly')],
    ['the connection was refused', connectError('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['something else failed', new TypeError('cannot read properties of undefined')],
  ])('when %s, then it is not', (_, error) => {
    expect(isTransactionConflict(error)).toBe(false);
  });
});

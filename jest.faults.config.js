/**
 * `npm run test:faults`: the fault suite of DESIGN §15. It starts its own PostgreSQL cluster
 * and redis-server (it kills both), so it needs no global setup, and runs alone.
 */
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test/faults'],
  testMatch: ['**/*.faults.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] },
  testTimeout: 420_000,
  maxWorkers: 1,
};

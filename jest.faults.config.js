/**
 * `npm run test:faults`, one file at a time after `npm test`: the fault suite of docs/design.md §15
 * (it starts its own PostgreSQL cluster and redis-server, and kills both), and the measured
 * promises whose figures are timings at a peer (`*.serial.ts`, such as the endpoint rate
 * limit's 55 a second), which a second test file sharing the machine's two cores would skew.
 */
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.faults.ts', '**/*.serial.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 420_000,
  maxWorkers: 1,
};

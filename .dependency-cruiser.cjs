// The module map's rules (docs/design.md, "Processes and modules"): `npm run lint:deps`, part of
// `npm run lint`. A type-only import counts like any other: it is still a dependency.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-folder-cycle',
      comment: 'Folders depend on each other in one direction only, so each can be read, tested and moved from the bottom up.',
      severity: 'error',
      scope: 'folder',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-module-cycle',
      comment: 'No two modules need each other: a shared type goes into a small file of its own.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-service-to-service',
      comment: 'The api, the webhook-worker and the receiver are separate processes: what two of them share lives in shared/.',
      severity: 'error',
      from: { path: '^services/(api|webhook-worker|receiver)/' },
      to: { path: '^services/([^/]+)/', pathNot: '^services/$1/' },
    },
    {
      name: 'webhook-no-db-or-queue',
      comment: 'shared/webhook (the helper class, signing, verifying) loads no database or queue code; its queue side is shared/deliveries/webhook-producer.ts.',
      severity: 'error',
      from: { path: '^shared/webhook/' },
      to: {
        path: ['^shared/(db|queue)/', '^node_modules/(pg|pg-[^/]+|sequelize|bullmq|ioredis)/'],
      },
    },
    {
      name: 'shared-not-to-services',
      comment: 'shared/ serves the services; it never reaches into one.',
      severity: 'error',
      from: { path: '^shared/' },
      to: { path: '^services/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|clients/node/dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};

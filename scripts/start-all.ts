import { concurrently } from 'concurrently';
import { projectRoot } from '../shared/db/migrate';
import { SERVICES } from './services';

/**
 * `npm start`: runs every service of {@link SERVICES} against DATABASE_URL and REDIS_URL
 * with name-prefixed logs. Ctrl-C (SIGINT) or SIGTERM reaches every child, and the first
 * one to fail stops the rest, so nothing is left running.
 */
function startAll(): void {
  const { result } = concurrently(
    SERVICES.map(({ name, command, env }) => ({ name, command, env })),
    { cwd: projectRoot(), prefix: 'name', padPrefix: true, killOthersOn: ['failure'] },
  );
  result.then(
    () => process.exit(0),
    () => process.exit(1),
  );
}

startAll();

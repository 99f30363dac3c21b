import closeWithGrace from 'close-with-grace';
import pino from 'pino';
import { ConfigError, loadConfig } from '../../../shared/config';
import { failIfPortUnusable, failStart } from '../../../shared/logging';
import { buildApp } from './app';

/** Starts the receiver on HOST:PORT (default 3002) and closes it cleanly on SIGINT/SIGTERM. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env, 'receiver');
  } catch (err) {
    if (err instanceof ConfigError) failStart('receiver', err.message);
    throw err;
  }
  const app = await buildApp(config);
  for (const warning of config.warnings) app.log.warn(warning);
  closeWithGrace({ delay: 10_000, logger: app.log }, async ({ err, signal }) => {
    if (err) app.log.error({ err }, 'receiver closing after an error');
    else app.log.info({ signal }, 'receiver closing');
    await app.close();
  });
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    await app.close();
    failIfPortUnusable('receiver', err, config.port, 'PORT');
    throw err;
  }
}

main().catch((err: unknown) => {
  pino().fatal({ err }, 'receiver failed to start');
  process.exitCode = 1;
});

# One image for every service; the command picks the service (see docker-compose.yml).
FROM node:24-bookworm-slim AS build
# npm's update notice would contact the registry on every `npm run`.
ENV NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
COPY package.json package-lock.json ./
# The typed client is a workspace of the root package: npm ci needs its manifest.
COPY clients/node/package.json clients/node/package.json
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY shared shared
COPY services services
COPY scripts scripts
COPY bench bench
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim
ENV NODE_ENV=production NPM_CONFIG_UPDATE_NOTIFIER=false
# Every interface inside the container; compose publishes the ports on loopback only.
ENV HOST=0.0.0.0
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/clients/node/package.json clients/node/package.json
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
# The dashboard's static files are served from the sources' place; tsc copies only TypeScript.
COPY services/api/dashboard services/api/dashboard
# sequelize-cli loads these with require() at run time, outside dist/.
COPY .sequelizerc ./
COPY migrations migrations
COPY seeders seeders
COPY scripts/create-database.js scripts/run-built.js scripts/
COPY shared/db/sequelize-cli-config.js shared/db/sequelize-cli-config.js
COPY shared/config/dev-defaults.json shared/config/dev-defaults.json
RUN mkdir -p storage/uploads && chown -R node:node storage
USER node
# No EXPOSE: each service listens on its own port (api 3000/3001, receiver 3002, worker 3003),
# set by PORT in docker-compose.yml.
CMD ["node", "dist/services/api/src/server.js"]

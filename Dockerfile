# svc container image. Build: docker build -t svc:0.1.0 .
# Run:   docker run -p 4000:4000 -p 4001:4001 -v $PWD/svc.yaml:/etc/svc/svc.yaml:ro svc:0.1.0 --config /etc/svc/svc.yaml
# Node major: the one package.json's `engines` names (test/unit/deploy.test.ts checks it).

# --- build: dev dependencies, TypeScript compiled to dist/ ---
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the `prepare` build needs the sources, copied below.
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY core ./core
COPY config ./config
COPY lib ./lib
COPY plugins ./plugins
COPY presets ./presets
COPY bin ./bin
RUN npm run build --silent

# --- runtime: production dependencies and the compiled package only, as `npm pack` ships it ---
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force
COPY --from=build /src/dist ./dist
COPY bin/svc.js ./bin/svc.js
# The operator page's static files (admin.ui), found by the compiled admin plugin.
COPY plugins/admin/ui/page/index.html plugins/admin/ui/page/app.js plugins/admin/ui/page/style.css ./plugins/admin/ui/page/
# The base image's unprivileged `node` user (uid 1000); nothing under /app is writable by it.
USER node
EXPOSE 4000 4001
# /healthcheck answers 503 while draining or with no healthy upstream (spec §2.4, §3.2).
# `svc healthcheck` probes the port the config names (server.httpPort), not a fixed 4000.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "bin/svc.js", "healthcheck", "--config", "/etc/svc/svc.yaml"]
# SIGTERM drains (waitBeforeShutdown, then waitAfterShutdown); a second signal exits at once.
ENTRYPOINT ["node", "bin/svc.js", "start"]
CMD ["--config", "/etc/svc/svc.yaml"]

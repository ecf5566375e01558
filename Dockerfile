# syntax=docker/dockerfile:1
# Build: compiles TypeScript and the better-sqlite3 native module, then drops the dev dependencies.
FROM node:22-bookworm-slim AS build
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts/build-console.mjs ./scripts/
COPY src ./src
# The web console: compiled and copied into dist/console-ui by the same build.
COPY console ./console
# `npm ci` runs the `prepare` script (tsc) with the dev dependencies; then only production ones stay.
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund

# Run: only the compiled service, its production dependencies and the configs; no compiler.
FROM node:22-bookworm-slim AS runtime
ENV NODE_ENV=production
# The demo defaults bind 127.0.0.1; inside a container the published port needs every interface.
ENV HOST=0.0.0.0
# Image-sized buffers (3 MB and more per image) come from mmap and go back to the system once
# freed; glibc's adaptive threshold would keep them in its heap, and the RSS with them.
ENV MALLOC_MMAP_THRESHOLD_=131072
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY config ./config
# The one place the service writes on its defaults (the SQLite store and its images); the other
# is the OS temp dir (/tmp: uploads spool there). Everything else may be read-only
# (readOnlyRootFilesystem under Kubernetes: mount volumes at both).
RUN mkdir -p /app/data && chown 1000:1000 /app/data && chmod 0700 /app/data
# The image's `node` user, by number: Kubernetes' runAsNonRoot can check a number, not a name.
USER 1000:1000
EXPOSE 8080
VOLUME ["/app/data"]
HEALTHCHECK --interval=30s --timeout=3s CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Exec form, node itself (not npm, which would write to ~/.npm and stand between node and the
# signals): SIGTERM reaches the service, which drains in-flight work before it exits.
CMD ["node", "dist/main.js"]

# syntax=docker/dockerfile:1
# Build: compiles TypeScript and the better-sqlite3 native module.
FROM node:22-bookworm-slim AS build
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts/build-console.mjs ./scripts/
COPY src ./src
# The web console: compiled and copied into dist/console-ui by the same build.
COPY console ./console
RUN npm ci && npm prune --omit=dev

# Run: only the compiled service, its production dependencies and the configs.
FROM node:22-bookworm-slim
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
RUN mkdir -p /app/data && chown node:node /app/data
USER node
EXPOSE 8080
VOLUME ["/app/data"]
HEALTHCHECK --interval=30s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# SIGTERM reaches node directly (exec form), so in-flight work drains before exit.
CMD ["node", "dist/main.js"]

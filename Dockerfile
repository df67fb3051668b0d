# syntax=docker/dockerfile:1
# The codecell gateway as an image: `docker build -t codecell .` in a clone, then
# `docker run -e CODECELL_TOKEN=... -p 8787:8787 -v codecell-data:/data codecell`.
# How to run it (config, volume, probes, replicas) is in docs/operating.md, "Running the image".
#
# BASE is any Debian-based Node 20 image that keeps Node's headers in /usr/local/include/node and has a
# `node` user (uid 1000), as the official images do.
ARG BASE=node:20-bookworm-slim

# A compiler for better-sqlite3 (the SQLite snapshot store), for when no prebuilt binary can be fetched.
FROM ${BASE} AS toolchain
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
# node-gyp compiles against the image's own headers instead of downloading them.
ENV npm_config_nodedir=/usr/local \
  npm_config_update_notifier=false \
  npm_config_fund=false \
  npm_config_audit=false

# The publishable packages, built and packed from the clone as docs/operating.md shows. Building and
# packing loads no native module, so no dependency's install script runs here: better-sqlite3 is fetched
# or compiled once, by the install stage's npm.
#
# Behind a proxy that intercepts TLS, hand its CA bundle (PEM) in as the build secret `ca`:
#   docker build --secret id=ca,src=/path/to/proxy-ca.pem -t codecell .
# Node (npm, pnpm, better-sqlite3's download) then trusts it in addition to its own CAs, in these RUN
# steps only: a secret is mounted for the step and is in no layer of any stage. Without it nothing changes.
FROM toolchain AS packages
WORKDIR /src
COPY . .
RUN --mount=type=secret,id=ca \
  if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
  && npx --yes pnpm@10.34.8 install --frozen-lockfile --ignore-scripts \
  && npx --yes pnpm@10.34.8 --filter @codecell/gateway... build \
  && npx --yes pnpm@10.34.8 -r --filter "./packages/*" --filter ./apps/gateway pack --pack-destination /packages

# The tarballs installed with npm alone, production dependencies only, install scripts included: what
# `npm install` of the published packages gives a user.
FROM toolchain AS install
COPY --from=packages /packages/ /packages/
COPY container/prune-install.sh /usr/local/bin/codecell-prune-install
WORKDIR /opt/codecell
RUN --mount=type=secret,id=ca \
  if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
  && echo '{ "name": "codecell-image", "private": true }' > package.json \
  && npm install --omit=dev --no-package-lock /packages/*.tgz \
  && codecell-prune-install /opt/codecell

# What runs: Node, the installed packages, the image's config; no compiler, no sources, no pnpm.
FROM ${BASE}
ENV NODE_ENV=production \
  CODECELL_DATA_DIR=/data \
  PATH=/opt/codecell/node_modules/.bin:$PATH
COPY --from=install /opt/codecell /opt/codecell
COPY container/codecell.json5 /etc/codecell/codecell.json5
# The SQLite store, its key file, the workspace and the memory server's file live in the volume.
RUN mkdir -p /data/workspace && chown -R node:node /data
VOLUME /data
USER node
WORKDIR /data
EXPOSE 8787
# Liveness (/healthz answers while the gateway serves, also while it drains). Orchestrators and load
# balancers should probe readiness on /readyz (503 while starting and draining); no token is needed.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8787/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Node itself is PID 1 (no shell or npx between), so SIGTERM reaches the gateway, which drains and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/opt/codecell/node_modules/@codecell/gateway/bin/codecell.js"]
CMD ["serve", "--config", "/etc/codecell/codecell.json5", "--http", "8787", "--host", "0.0.0.0"]

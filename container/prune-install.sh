#!/bin/sh
# Removes what only compiling better-sqlite3 needed from an npm install (its C sources, object files and
# test extension), keeping the compiled binding. Run on the image's install folder (the Dockerfile's
# install stage), and by scripts/container-check.mjs on its install of the packed packages.
set -eu
dir="${1:?usage: prune-install.sh <install folder>}/node_modules/better-sqlite3"
[ -d "$dir" ] || exit 0
rm -rf "$dir/deps" "$dir/src" "$dir/build/deps" "$dir/build/Release/obj.target" "$dir/build/Release/.deps" \
  "$dir/build/Release/obj" "$dir/build/Release/test_extension.node" "$dir/build/Makefile" "$dir/build/"*.mk

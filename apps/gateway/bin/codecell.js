#!/usr/bin/env node
// A committed shim so package managers can link the bin before the first build.
await import("../dist/cli.js");

// Loaded with `node --import` before the conformance suite: its 0.2 pre-releases import Node 22's
// `globSync` from "fs" by name, which Node 20 lacks. Patching `fs` here would come too late for a named
// import (it is linked before any code runs), so a resolve hook hands those imports a wrapper instead.
import { register } from "node:module";

register("./hooks.mjs", import.meta.url);

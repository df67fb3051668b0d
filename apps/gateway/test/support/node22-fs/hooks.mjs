// The resolve hook: "fs" and "node:fs" imported from outside this folder resolve to fs-with-glob.mjs;
// the wrapper's own import of the real module goes through untouched.
const WRAPPER = new URL("./fs-with-glob.mjs", import.meta.url).href;
const HERE = new URL("./", import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  const fromHere = context.parentURL?.startsWith(HERE) ?? false;
  if ((specifier === "fs" || specifier === "node:fs") && !fromHere)
    return { url: WRAPPER, shortCircuit: true };
  return nextResolve(specifier, context);
}

/**
 * The wire format shared with the sandbox. A callable scope member is serialized as an object with the
 * single key `$codecellCall` whose value is the member's path from the namespace root, segments joined
 * with `.`: `Issues.list` is "list", `Issues.admin.close` is "admin.close", an array member
 * `Issues.steps[0]` is "steps.0". The sandbox turns each marker into an async function that sends
 * `{kind: "namespace", namespaceId, path, args}` back to the host, path unchanged.
 */
export const CALL_MARKER_KEY = "$codecellCall";
export const NAMESPACE_PATH_SEPARATOR = ".";

import { CodeModeError, type JsonValue } from "@codecell/contract";
import { isNamespaceToolMarker, type NamespaceToolMarker } from "./namespace-tool.js";
import { CALL_MARKER_KEY, NAMESPACE_PATH_SEPARATOR } from "./scope-format.js";

const MAX_DEPTH = 32;
const MAX_NODES = 10_000;
const UNSAFE_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype", CALL_MARKER_KEY]);

export type SerializedScope = {
  scope: JsonValue;
  callables: Array<{ path: string; marker: NamespaceToolMarker }>;
};

/**
 * Turns what `createScope` returned into JSON for the sandbox, collecting the call markers' paths.
 * Shared references are written out at each place they occur; cycles, raw functions, promises and
 * unsafe keys are refused (they would smuggle host behaviour or break path addressing); values JSON
 * cannot hold get JSON-safe stand-ins.
 */
export function serializeScope(root: unknown, label: string): SerializedScope {
  if (typeof root !== "object" || root === null || Array.isArray(root) || isNamespaceToolMarker(root)) {
    throw new CodeModeError("invalid_config", `${label}: createScope must return a plain object of members.`);
  }
  const callables: SerializedScope["callables"] = [];
  const scope = toJson(root, label, (path, marker) => {
    const joined = path.join(NAMESPACE_PATH_SEPARATOR);
    callables.push({ path: joined, marker });
    return { [CALL_MARKER_KEY]: joined };
  });
  return { scope: scope ?? null, callables };
}

/**
 * An input mapper's result as tool input: the same JSON-safe conversion, with any keys allowed (tool
 * inputs are data, not paths). Functions, markers and cycles mean the mapper is broken.
 */
export function toJsonInput(value: unknown, label: string): JsonValue {
  if (value === undefined) return {};
  return toJson(value, label, undefined) ?? null;
}

type MarkerWriter = (path: readonly string[], marker: NamespaceToolMarker) => JsonValue;

function toJson(root: unknown, label: string, writeMarker: MarkerWriter | undefined): JsonValue | undefined {
  const ancestors = new Set<object>();
  let nodes = 0;

  const refuse = (path: readonly string[], problem: string): never => {
    const where = path.length === 0 ? label : `${label}.${path.join(NAMESPACE_PATH_SEPARATOR)}`;
    throw new CodeModeError("invalid_config", `${where} ${problem}`, {
      path: path.join(NAMESPACE_PATH_SEPARATOR),
    });
  };

  // Returns undefined for members JSON would drop (undefined, symbols) so the caller can skip them.
  const visit = (value: unknown, path: string[]): JsonValue | undefined => {
    if (++nodes > MAX_NODES)
      refuse(path, `makes the value larger than ${MAX_NODES} items; keep scopes small.`);
    if (path.length > MAX_DEPTH) refuse(path, `nests deeper than ${MAX_DEPTH} levels.`);
    switch (typeof value) {
      case "string":
      case "boolean":
        return value;
      case "number":
        return Number.isFinite(value) ? value : null;
      case "bigint":
        return value.toString();
      case "undefined":
      case "symbol":
        return undefined;
      case "function":
        return refuse(
          path,
          "is a raw function. Host functions never enter the sandbox: wrap the catalog tool with createCodeModeNamespaceTool(toolName, inputMapper).",
        );
    }
    if (value === null) return null;
    const object = value as object;
    if (isNamespaceToolMarker(object)) {
      if (writeMarker === undefined)
        return refuse(path, "is a namespace tool marker; return plain input data.");
      return writeMarker(path, object);
    }
    if (ancestors.has(object)) refuse(path, "refers back to one of its own containers (a cycle).");
    if (typeof (object as { then?: unknown }).then === "function") {
      refuse(path, "is a promise or thenable; createScope and input mappers must return data synchronously.");
    }
    ancestors.add(object);
    try {
      return visitObject(object, path);
    } finally {
      ancestors.delete(object);
    }
  };

  const visitObject = (object: object, path: string[]): JsonValue | undefined => {
    if (Array.isArray(object)) {
      return object.map((item, index) => visit(item, [...path, String(index)]) ?? null);
    }
    if (ArrayBuffer.isView(object) || object instanceof ArrayBuffer) {
      return `[binary data, ${object.byteLength} bytes: not supported here]`;
    }
    if (object instanceof Map) return visit([...object.entries()], path);
    if (object instanceof Set) return visit([...object.values()], path);
    if (object instanceof Error) return { name: object.name, message: object.message };
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") return visit(toJSON.call(object), path);
    const result: Record<string, JsonValue> = {};
    for (const key of Object.keys(object)) {
      const keyPath = [...path, key];
      if (
        writeMarker !== undefined &&
        (key === "" || UNSAFE_KEYS.has(key) || key.includes(NAMESPACE_PATH_SEPARATOR))
      ) {
        refuse(
          keyPath,
          `has the unsafe key ${JSON.stringify(key)}: scope keys may not be empty, "__proto__", "constructor", "prototype", "${CALL_MARKER_KEY}" or contain "${NAMESPACE_PATH_SEPARATOR}".`,
        );
      }
      const member = visit((object as Record<string, unknown>)[key], keyPath);
      // defineProperty, so a "__proto__" key in input data stays an ordinary own key.
      if (member !== undefined) {
        Object.defineProperty(result, key, {
          value: member,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
    }
    return result;
  };

  return visit(root, []);
}

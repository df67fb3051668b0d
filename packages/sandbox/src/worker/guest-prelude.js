// One file on purpose, past ~600 lines: `guestPrelude` is evaluated inside the VM from its source text
// (GUEST_PRELUDE_SOURCE below), so every helper it uses must sit in its one closure; nothing it calls can
// be imported. Split into modules, its pieces would have to be concatenated by a build step, and a
// security review could no longer read the whole trusted surface top to bottom in one place.
import { CompileFlags } from "quickjs-wasi";

/**
 * The trusted guest prelude. Its source (not this module) is evaluated inside every fresh VM before
 * user code: it receives the one host function and the surface JSON, installs the frozen guest
 * globals, and returns a `control` function that only the worker holds. Every bridge helper lives in
 * this closure, so nothing internal is reachable from a guest global or a guest object.
 *
 * It captures the intrinsics it needs up front, so a cell that later patches `JSON`, `Promise`,
 * `Map.prototype` or `Object.prototype` cannot redirect the bridge.
 *
 * Guest code does run inside prelude frames (getters, `toJSON`, proxies and thenables the bridge
 * touches), so no function of this closure may be recoverable from a running guest function: the
 * prelude is strict (no `caller`), and the engine's V8-style stack API, whose `CallSite.getFunction()`
 * hands out every function on the stack, is switched off before any guest code runs.
 *
 * Host protocol (all arguments are strings):
 * - host(bodyJson) -> the request's id (a number), or `{"error": {...}}` JSON when refused. A request is
 *   the one call with a single argument: the worker tells it by its argument count, without reading an
 *   op string out of the VM (the call every tool call makes).
 * - host("output", "text" | "json" | "image", text)
 * - host("done", resultJson) and host("fail", errorJson), once per run
 *
 * @param {(...args: string[]) => string | number} host
 * @param {string} surfaceText
 */
export function guestPrelude(host, surfaceText) {
  const globalObject = globalThis;
  const ObjectCtor = Object;
  const freeze = ObjectCtor.freeze;
  const isFrozen = ObjectCtor.isFrozen;
  const defineProperty = ObjectCtor.defineProperty;
  const createObject = ObjectCtor.create;
  const ownNames = ObjectCtor.getOwnPropertyNames;
  const objectKeys = ObjectCtor.keys;
  const protoOf = ObjectCtor.prototype.isPrototypeOf;
  const hasOwn = ObjectCtor.prototype.hasOwnProperty;
  const apply = Reflect.apply;
  /** hasOwnOf(object, key): hasOwnProperty without an argument array per call (see define). */
  const hasOwnOf = apply(Function.prototype.bind, Function.prototype.call, [hasOwn]);
  const jsonParse = JSON.parse;
  const jsonStringify = JSON.stringify;
  const PromiseCtor = Promise;
  const promisePrototype = PromiseCtor.prototype;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const errorPrototype = ErrorCtor.prototype;
  const StringCtor = String;
  const isArray = Array.isArray;
  const getPrototypeOf = ObjectCtor.getPrototypeOf;
  const objectPrototype = ObjectCtor.prototype;
  const arrayPrototype = Array.prototype;
  const isView = ArrayBuffer.isView;
  const arrayBufferPrototype = ArrayBuffer.prototype;
  const sharedBufferPrototype = typeof SharedArrayBuffer === "function" ? SharedArrayBuffer.prototype : null;
  const mapPrototype = Map.prototype;
  const mapForEach = mapPrototype.forEach;
  const setPrototype = Set.prototype;
  const setForEach = setPrototype.forEach;
  const arrayJoin = arrayPrototype.join;
  const WeakSetCtor = WeakSet;
  const weakSetAdd = WeakSetCtor.prototype.add;
  const weakSetHas = WeakSetCtor.prototype.has;

  // No CallSite ever reaches the guest: `Error.prepareStackTrace` becomes a fixed `undefined` (the
  // engine keeps its hook in an accessor this replaces), so stacks stay strings.
  defineProperty(ErrorCtor, "prepareStackTrace", {
    value: undefined,
    writable: false,
    enumerable: false,
    configurable: false,
  });

  // QuickJS strings stop at 2^30 - 1 characters. A join whose separators alone pass that would run for
  // seconds inside one built-in (where the interrupt cannot stop it) before failing; fail it at once
  // with the engine's own size-limit error instead.
  const MAX_STRING_LENGTH = 1073741823;
  defineProperty(arrayPrototype, "join", {
    value: function join(separator) {
      if (this !== undefined && this !== null) {
        const length = +this.length;
        const separatorLength = separator === undefined ? 1 : StringCtor(separator).length;
        if (length > 1 && (length - 1) * separatorLength > MAX_STRING_LENGTH) {
          throw new RangeErrorCtor("string too long");
        }
      }
      return apply(arrayJoin, this, [separator]);
    },
    writable: true,
    enumerable: false,
    configurable: true,
  });

  /** Errors this prelude made: only they may carry a code that fails the run with that code. */
  const bridgeErrors = new WeakSetCtor();
  /** Resolvers of in-flight host requests, keyed by request id. */
  const pending = createObject(null);

  function inherits(prototype, value) {
    return prototype !== null && apply(protoOf, prototype, [value]);
  }

  function makeError(name, message, code, details) {
    const error = new ErrorCtor(StringCtor(message));
    defineProperty(error, "name", {
      value: StringCtor(name),
      writable: true,
      enumerable: false,
      configurable: true,
    });
    if (typeof code === "string") {
      defineProperty(error, "code", { value: code, writable: false, enumerable: true, configurable: false });
    }
    if (details !== undefined && details !== null) {
      defineProperty(error, "details", {
        value: details,
        writable: false,
        enumerable: true,
        configurable: false,
      });
    }
    apply(weakSetAdd, bridgeErrors, [error]);
    return error;
  }

  function rejected(error) {
    return new PromiseCtor((_resolve, reject) => reject(error));
  }

  function resolved(value) {
    return new PromiseCtor((resolve) => resolve(value));
  }

  // The guest half of the JSON adapter: the same fallbacks as the host half in @codecell/bridge. Only
  // the guest's own output depends on these checks (it crosses as JSON text either way), so they favour
  // speed: plain objects and arrays return at once, and nothing here throws to test a brand.
  function replacer(key, value) {
    const type = typeof value;
    if (type === "bigint") return StringCtor(value);
    if (type === "function" || type === "symbol") return undefined;
    if (type !== "object" || value === null) return value;
    const prototype = getPrototypeOf(value);
    if (prototype === objectPrototype || prototype === arrayPrototype || prototype === null) return value;
    // A promise would cross as `{}`: a call the cell did not await, which it never meant to send.
    if (inherits(promisePrototype, value)) {
      promiseKey = StringCtor(key);
      throw promiseFound;
    }
    if (isView(value) || inherits(arrayBufferPrototype, value) || inherits(sharedBufferPrototype, value)) {
      throw new TypeErrorCtor(
        "binary values (ArrayBuffer, typed arrays, DataView) cannot cross the sandbox bridge in v1; send base64 text or an array of numbers",
      );
    }
    if (inherits(mapPrototype, value)) {
      const pairs = [];
      let index = 0;
      apply(mapForEach, value, [
        (item, key) => {
          pairs[index++] = [key, item];
        },
      ]);
      return pairs;
    }
    if (inherits(setPrototype, value)) {
      const items = [];
      let index = 0;
      apply(setForEach, value, [
        (item) => {
          items[index++] = item;
        },
      ]);
      return items;
    }
    if (inherits(errorPrototype, value)) {
      const data = { name: StringCtor(value.name), message: StringCtor(value.message) };
      if (typeof value.code === "string") data.code = value.code;
      return data;
    }
    return value;
  }

  /** Thrown by the replacer at a promise, with its key in promiseKey, for jsonTextOf to word. */
  const promiseFound = createObject(null);
  let promiseKey = "";

  /** What text output (console.*, text()) shows for a promise: it cannot fail the line it is in. */
  const PROMISE_TEXT = "[Promise: await it for its value]";
  function textReplacer(key, value) {
    return typeof value === "object" && value !== null && inherits(promisePrototype, value)
      ? PROMISE_TEXT
      : apply(replacer, this, [key, value]);
  }

  /**
   * JSON text of a value, or undefined when JSON has none (a function, a symbol, undefined). A promise
   * in it fails (see replacer), except in text output, which shows PROMISE_TEXT.
   */
  function jsonTextOf(value, label, forText) {
    try {
      return apply(jsonStringify, undefined, [value, forText === true ? textReplacer : replacer]);
    } catch (error) {
      if (error === promiseFound) {
        const where = promiseKey === "" ? "" : ` (at "${promiseKey}")`;
        throw new TypeErrorCtor(
          `${label} holds a promise${where}, which cannot cross the sandbox bridge: await it first (const x = await tools.read_file(...)), or await Promise.all([...]) for several`,
        );
      }
      if (
        apply(protoOf, TypeErrorCtor.prototype, [error]) &&
        /circular|cycl/i.test(StringCtor(error.message))
      ) {
        throw new TypeErrorCtor(
          `${label} has a cycle and cannot cross the sandbox bridge; remove the back-reference`,
        );
      }
      if (apply(protoOf, RangeErrorCtor.prototype, [error])) {
        throw new RangeErrorCtor(
          `${label} is nested too deeply (or cyclic through a Map or Set) to cross the sandbox bridge`,
        );
      }
      throw error;
    }
  }

  function toJsonText(value, label, forText) {
    const text = jsonTextOf(value, label, forText);
    return text === undefined ? "null" : text;
  }

  function request(body, resultIsVoid) {
    let text;
    try {
      text = toJsonText(body, "the tool input");
    } catch (error) {
      return rejected(error);
    }
    return requestText(text, resultIsVoid);
  }

  /** The body of a call to `target` up to its input, as JSON text. */
  function callPrefix(target) {
    return `{"kind":"call","target":${apply(jsonStringify, undefined, [target])},"input":`;
  }

  // A tool call's body is ours but for its input: only the input goes through the replacer (the
  // common shape of a cell, a loop of tool calls, pays for one small stringify, not the whole body).
  // `prefix` is callPrefix(target), made once per tool for the tools.<name> functions.
  function callRequest(target, input, prefix) {
    let inputText;
    try {
      inputText = jsonTextOf(input, "the tool input");
    } catch (error) {
      return rejected(error);
    }
    // No JSON for the input (a function, say): the whole body goes as before, and the host says why.
    if (inputText === undefined) return request({ kind: "call", target, input }, false);
    return requestText(`${prefix}${inputText}}`, false);
  }

  function requestText(text, resultIsVoid) {
    const reply = host(text);
    if (typeof reply !== "number") {
      const data = jsonParse(reply).error;
      return rejected(makeError(data.name, data.message, data.code, data.details));
    }
    return new PromiseCtor((resolve, reject) => {
      pending[reply] = { resolve, reject, resultIsVoid };
    });
  }

  function settle(requestId, ok, text) {
    const entry = pending[requestId];
    if (entry === undefined) return "unknown";
    delete pending[requestId];
    const value = jsonParse(text);
    if (ok === "1") {
      // A load answers `{value}`, or `{}` for a key with nothing stored: JSON has no undefined.
      entry.resolve(
        entry.resultIsVoid === true
          ? undefined
          : entry.resultIsVoid === UNWRAP_VALUE
            ? value !== null && typeof value === "object" && hasOwnOf(value, "value")
              ? value.value
              : undefined
            : value,
      );
    } else {
      entry.reject(makeError(value.name, value.message, value.code, value.details));
    }
    return "settled";
  }

  function describeError(error) {
    const data = { name: "Error", message: "", code: null, stack: "" };
    try {
      if ((typeof error === "object" || typeof error === "function") && error !== null) {
        data.name = StringCtor(error.name);
        data.message = StringCtor(error.message);
        if (apply(weakSetHas, bridgeErrors, [error]) && typeof error.code === "string")
          data.code = error.code;
        const stack = error.stack;
        if (typeof stack === "string") data.stack = stack;
      } else {
        data.message = StringCtor(error);
      }
    } catch {
      data.message = "the thrown value could not be described";
    }
    return apply(jsonStringify, undefined, [data]);
  }

  function textOf(value) {
    if (typeof value === "string") return value;
    if (value === undefined || value === null || typeof value !== "object") return StringCtor(value);
    if (apply(protoOf, errorPrototype, [value]))
      return `${StringCtor(value.name)}: ${StringCtor(value.message)}`;
    if (inherits(promisePrototype, value)) return PROMISE_TEXT;
    return toJsonText(value, "the text() value", true);
  }

  function deepFreeze(value) {
    if ((typeof value === "object" || typeof value === "function") && value !== null && !isFrozen(value)) {
      freeze(value);
      const names = ownNames(value);
      for (let index = 0; index < names.length; index++) deepFreeze(value[names[index]]);
    }
    return value;
  }

  // One descriptor each for define and defineAliases, filled in place: a catalog of hundreds of tools
  // has the prelude define a property for every tool and each of its aliases in every fresh VM, and a
  // descriptor object (and an argument array for hasOwnProperty) per property was a third of that time.
  // Null prototypes, so nothing Object.prototype gains is read as part of a descriptor.
  const shownDescriptor = {
    __proto__: null,
    value: undefined,
    writable: false,
    enumerable: true,
    configurable: false,
  };
  const hiddenDescriptor = {
    __proto__: null,
    value: undefined,
    writable: false,
    enumerable: false,
    configurable: false,
  };

  function define(target, name, value) {
    shownDescriptor.value = value;
    defineProperty(target, name, shownDescriptor);
    shownDescriptor.value = undefined;
  }

  function defineAliases(target, aliases, value) {
    if (!isArray(aliases)) return;
    hiddenDescriptor.value = value;
    for (let index = 0; index < aliases.length; index++) {
      const alias = aliases[index];
      if (typeof alias !== "string" || hasOwnOf(target, alias)) continue;
      defineProperty(target, alias, hiddenDescriptor);
    }
    hiddenDescriptor.value = undefined;
  }

  function requireString(value, what) {
    if (typeof value !== "string" || value.length === 0) {
      throw new TypeErrorCtor(`${what} must be a non-empty string`);
    }
    return value;
  }

  const surface = jsonParse(surfaceText);

  // tools: search, describe, call, and one convenience function per unambiguous safe name.
  const tools = {};
  // tools.search ranks the catalog without MCP tools; API.search (scope "mcp") ranks only MCP tools.
  function searchRequest(query, options, what, scope) {
    try {
      // The shapes models bring from other search APIs mean the same: search({ query, limit }) and
      // search(query, limit).
      if (
        typeof query === "object" &&
        query !== null &&
        options === undefined &&
        typeof query.query === "string"
      ) {
        options = query.limit === undefined ? undefined : { limit: query.limit };
        query = query.query;
      }
      if (typeof options === "number") options = { limit: options };
      const body = { kind: "search", query: requireString(query, `${what}(query): query`) };
      if (scope !== undefined) body.scope = scope;
      if (options !== undefined && options !== null) {
        if (typeof options !== "object")
          throw new TypeErrorCtor(`${what}(query, options): options must be an object such as { limit: 5 }`);
        const limit = options.limit;
        if (limit !== undefined) {
          if (typeof limit !== "number") throw new TypeErrorCtor(`${what} options.limit must be a number`);
          body.options = { limit };
        }
      }
      return request(body, false);
    } catch (error) {
      return rejected(error);
    }
  }
  define(tools, "search", function search(query, options) {
    return searchRequest(query, options, "tools.search", undefined);
  });
  define(tools, "describe", function describe(idOrName) {
    try {
      return request({ kind: "describe", target: requireString(idOrName, "tools.describe(id): id") }, false);
    } catch (error) {
      return rejected(error);
    }
  });
  const callTool = function call(idOrName, input) {
    try {
      const target = requireString(idOrName, "tools.call(id, input): id");
      return callRequest(target, input === undefined ? {} : input, callPrefix(target));
    } catch (error) {
      return rejected(error);
    }
  };
  define(tools, "call", callTool);
  // The body's prefix is made on a tool's first call rather than on every call, or for every tool of
  // the catalog in every VM; an id tools.call would refuse goes through tools.call, which says why.
  function shortcutFor(toolId) {
    if (typeof toolId !== "string" || toolId.length === 0) return (input) => callTool(toolId, input);
    let prefix = null;
    return (input) => {
      try {
        if (prefix === null) prefix = callPrefix(toolId);
        return callRequest(toolId, input === undefined ? {} : input, prefix);
      } catch (error) {
        return rejected(error);
      }
    };
  }
  const toolFunctions = surface.toolFunctions;
  for (let index = 0; index < toolFunctions.length; index++) {
    const entry = toolFunctions[index];
    if (hasOwnOf(tools, entry.name)) continue;
    const shortcut = shortcutFor(entry.toolId);
    define(tools, entry.name, shortcut);
    defineAliases(tools, entry.aliases, shortcut);
  }
  freeze(tools);

  // MCP.<server>.<tool>(input), $api, resources and prompts.
  const mcp = {};
  for (const server of surface.mcpServers) {
    const serverId = server.identifier;
    const namespace = {};
    const mcpRequest = (op, toolId, args) => {
      const body = { kind: "mcp", server: serverId, op, args };
      if (toolId !== undefined) body.toolId = toolId;
      return request(body, false);
    };
    const serverTools = server.tools;
    for (let index = 0; index < serverTools.length; index++) {
      const toolId = serverTools[index].toolId;
      const callMcpTool = (input) => mcpRequest("call", toolId, [input === undefined ? {} : input]);
      define(namespace, serverTools[index].identifier, callMcpTool);
    }
    if (!apply(hasOwn, namespace, ["$api"])) {
      define(namespace, "$api", (...args) => mcpRequest("$api", undefined, args));
    }
    if (server.resources && !apply(hasOwn, namespace, ["resources"])) {
      const resources = {};
      define(resources, "list", (...args) => mcpRequest("resources.list", undefined, args));
      define(resources, "read", (...args) => mcpRequest("resources.read", undefined, args));
      define(namespace, "resources", freeze(resources));
    }
    if (server.prompts && !apply(hasOwn, namespace, ["prompts"])) {
      const prompts = {};
      define(prompts, "list", (...args) => mcpRequest("prompts.list", undefined, args));
      define(prompts, "get", (...args) => mcpRequest("prompts.get", undefined, args));
      define(namespace, "prompts", freeze(prompts));
    }
    for (let index = 0; index < serverTools.length; index++) {
      const tool = serverTools[index];
      defineAliases(namespace, tool.aliases, namespace[tool.identifier]);
    }
    define(mcp, serverId, freeze(namespace));
  }
  for (const server of surface.mcpServers) defineAliases(mcp, server.aliases, mcp[server.identifier]);
  freeze(mcp);

  // API: the virtual declaration files. Paths, descriptions and sizes are answered here; a file's text
  // comes from the host (an "api" request), so a VM does not carry every server's declarations.
  const apiFiles = createObject(null);
  const apiPaths = [];
  for (const file of surface.apiFiles) {
    apiFiles[file.path] = file;
    apiPaths[apiPaths.length] = file.path;
  }
  // Directories that hold API files ("mcp"): with the file paths, the only prefixes API.list accepts.
  const apiDirectories = [];
  for (let index = 0; index < apiPaths.length; index++) {
    const segments = apiPaths[index].split("/");
    for (let end = 1; end < segments.length; end++) {
      const directory = segments.slice(0, end).join("/");
      if (apiDirectories.indexOf(directory) < 0) apiDirectories[apiDirectories.length] = directory;
    }
  }
  // One trailing "/" is allowed on a list prefix ("mcp/" is "mcp"); a read names a file exactly.
  function checkedApiPath(path, what, isPrefix) {
    if (typeof path !== "string")
      throw new TypeErrorCtor(`${what} must be a string such as "mcp/index.d.ts"`);
    const trimmed = isPrefix && path.length > 0 && path[path.length - 1] === "/" ? path.slice(0, -1) : path;
    if (trimmed.length === 0) {
      if (isPrefix && path.length === 0) return "";
      throw makeError(
        "Error",
        path.length === 0
          ? `${what} is empty`
          : `${what} "${path}" has an empty segment; use paths from API.list()`,
        "invalid_input",
      );
    }
    const segments = trimmed.split("/");
    for (let index = 0; index < segments.length; index++) {
      const segment = segments[index];
      if (segment === "" || segment === "." || segment === "..") {
        throw makeError(
          "Error",
          `${what} "${path}" has an empty, "." or ".." segment; use paths from API.list()`,
          "invalid_input",
        );
      }
    }
    return trimmed;
  }
  // A short spelling ("memory.d.ts", "memory") of the one path it can mean, from the host's table.
  const apiShortPaths = surface.apiShortPaths || {};
  function apiPathOf(wanted) {
    const found =
      apiFiles[wanted] === undefined && apply(hasOwn, apiShortPaths, [wanted]) ? apiShortPaths[wanted] : null;
    return found !== null && found.length === 1 ? found[0] : wanted;
  }
  const api = {};
  define(api, "list", function list(prefix) {
    try {
      let wanted = prefix === undefined ? "" : checkedApiPath(prefix, "API.list(prefix): prefix", true);
      if (wanted !== "") wanted = apiPathOf(wanted);
      if (wanted !== "" && apiFiles[wanted] === undefined && apiDirectories.indexOf(wanted) < 0) {
        throw makeError(
          "Error",
          `API.list: there is no directory or file "${wanted}"; valid prefixes are "${apiDirectories.concat(apiPaths).join('", "')}", and API.list() lists every file`,
          "invalid_input",
        );
      }
      const files = [];
      for (let index = 0; index < apiPaths.length; index++) {
        const path = apiPaths[index];
        if (wanted === "" || path === wanted || path.startsWith(`${wanted}/`)) {
          const file = apiFiles[path];
          files[files.length] = { path, description: file.description, bytes: file.bytes };
        }
      }
      return resolved(files);
    } catch (error) {
      return rejected(error);
    }
  });
  define(api, "search", function search(query, options) {
    return searchRequest(query, options, "API.search", "mcp");
  });
  define(api, "read", function read(path) {
    try {
      const wanted = apiPathOf(checkedApiPath(path, "API.read(path): path", false));
      const file = apiFiles[wanted];
      if (file === undefined) {
        throw makeError(
          "Error",
          `API.read: there is no file "${wanted}"; the files are "${apiPaths.join('", "')}"`,
          "invalid_input",
        );
      }
      return request({ kind: "api", path: wanted }, false);
    } catch (error) {
      return rejected(error);
    }
  });
  freeze(api);

  // Namespaces: scope JSON with call markers turned into async functions.
  function buildScope(value, namespaceId) {
    if (isArray(value)) {
      const items = [];
      for (let index = 0; index < value.length; index++) items[index] = buildScope(value[index], namespaceId);
      return freeze(items);
    }
    if (typeof value !== "object" || value === null) return value;
    const keys = objectKeys(value);
    if (keys.length === 1 && keys[0] === "$codecellCall" && typeof value.$codecellCall === "string") {
      const path = value.$codecellCall;
      return (...args) => request({ kind: "namespace", namespaceId, path, args }, false);
    }
    const scope = {};
    for (let index = 0; index < keys.length; index++) {
      define(scope, keys[index], buildScope(value[keys[index]], namespaceId));
    }
    return freeze(scope);
  }
  const namespaces = {};
  const namespaceGlobals = [];
  for (const entry of surface.namespaces) {
    const scope = buildScope(entry.scope, entry.namespaceId);
    define(namespaces, entry.globalName, scope);
    namespaceGlobals[namespaceGlobals.length] = [entry.globalName, scope];
  }
  freeze(namespaces);

  function text(value) {
    host("output", "text", textOf(value));
  }
  const guestConsole = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    define(guestConsole, level, (...args) => {
      let line = "";
      for (let index = 0; index < args.length; index++) line += (index > 0 ? " " : "") + textOf(args[index]);
      host("output", "text", line, level);
    });
  }
  freeze(guestConsole);
  function json(value) {
    const reply = host("output", "json", toJsonText(value, "the json() value"));
    if (reply !== "") {
      const data = jsonParse(reply).error;
      throw makeError(data.name, data.message, data.code);
    }
  }
  // image(source): a data URL, an image content item ({type: "image", data, mimeType}), a tool result
  // whose `content` holds image items, or an array of these. The host checks type and size.
  function imageSources(source, found, depth) {
    if (typeof source === "string") {
      found[found.length] = { dataUrl: source };
    } else if (isArray(source) && depth < 2) {
      for (let index = 0; index < source.length; index++) imageSources(source[index], found, depth + 1);
    } else if (typeof source === "object" && source !== null) {
      if (source.type === "image") {
        found[found.length] = { mimeType: StringCtor(source.mimeType), data: source.data };
      } else if (isArray(source.content) && depth < 2) {
        const content = source.content;
        for (let index = 0; index < content.length; index++) {
          if (
            typeof content[index] === "object" &&
            content[index] !== null &&
            content[index].type === "image"
          ) {
            imageSources(content[index], found, depth + 1);
          }
        }
      }
    }
    return found;
  }
  function image(source) {
    const found = imageSources(source, [], 0);
    if (found.length === 0) {
      throw new TypeErrorCtor(
        'image(source): no image in the source; pass a data URL ("data:image/png;base64,..."), an image content item ({type: "image", data, mimeType}) or a tool result whose content holds one',
      );
    }
    const reply = host("output", "image", toJsonText(found, "the image() source"));
    if (reply !== "") {
      const data = jsonParse(reply).error;
      throw makeError(data.name, data.message, data.code);
    }
  }

  function yieldControl(reason) {
    const body = { kind: "yield" };
    if (reason !== undefined) body.reason = StringCtor(reason);
    return request(body, true);
  }

  // store/load: the conversation's values, kept by the host between cells. Keys are short strings; a
  // value crosses as JSON, like a tool input, and one without JSON (undefined) deletes the key.
  const UNWRAP_VALUE = "value";
  const MAX_STORE_KEY_LENGTH = 256;
  function storeKey(key, what) {
    if (typeof key !== "string" || key.length === 0 || key.length > MAX_STORE_KEY_LENGTH) {
      throw new TypeErrorCtor(
        `${what}: key must be a string of 1 to ${MAX_STORE_KEY_LENGTH} characters, such as "issues"`,
      );
    }
    return key;
  }
  function storeValue(key, value) {
    try {
      const keyText = apply(jsonStringify, undefined, [storeKey(key, "store(key, value)")]);
      const valueText = jsonTextOf(value, "the stored value");
      if (valueText === undefined)
        return requestText(`{"kind":"store","op":"delete","key":${keyText}}`, true);
      return requestText(`{"kind":"store","op":"set","key":${keyText},"value":${valueText}}`, true);
    } catch (error) {
      return rejected(error);
    }
  }
  define(storeValue, "keys", function keys() {
    return request({ kind: "store", op: "keys" }, false);
  });
  define(storeValue, "delete", function deleteKey(key) {
    try {
      return request({ kind: "store", op: "delete", key: storeKey(key, "store.delete(key)") }, false);
    } catch (error) {
      return rejected(error);
    }
  });
  function load(key) {
    try {
      return request({ kind: "store", op: "get", key: storeKey(key, "load(key)") }, UNWRAP_VALUE);
    } catch (error) {
      return rejected(error);
    }
  }

  function installGlobal(name, value) {
    if (apply(hasOwn, globalObject, [name])) {
      throw new TypeErrorCtor(`the guest global "${name}" already exists; pick another namespace globalName`);
    }
    defineProperty(globalObject, name, { value, writable: false, enumerable: false, configurable: false });
  }
  installGlobal("ALL_TOOLS", deepFreeze(surface.allTools));
  installGlobal("tools", tools);
  installGlobal("MCP", mcp);
  installGlobal("API", api);
  installGlobal("namespaces", namespaces);
  installGlobal("text", freeze(text));
  installGlobal("console", guestConsole);
  installGlobal("json", freeze(json));
  installGlobal("yield_control", freeze(yieldControl));
  installGlobal("store", freeze(storeValue));
  installGlobal("load", freeze(load));
  installGlobal("image", freeze(image));
  for (let index = 0; index < namespaceGlobals.length; index++) {
    installGlobal(namespaceGlobals[index][0], namespaceGlobals[index][1]);
  }

  function onResult(value) {
    let resultText;
    try {
      // JSON would make it null: a function the cell meant to call (`return Notes.list`).
      if (typeof value === "function") {
        throw new TypeErrorCtor(
          "the returned value is a function, which cannot cross the sandbox bridge: call it and return what it gives (return await main(), return await Notes.list())",
        );
      }
      resultText = toJsonText(value, "the returned value");
    } catch (error) {
      host("fail", describeError(error));
      return;
    }
    host("done", resultText);
  }
  function onFailure(error) {
    host("fail", describeError(error));
  }
  // `await` takes the cell's promise as it is: no species constructor or `then` lookup a cell could
  // have patched stands between the cell and its result.
  async function runCell(cell) {
    let value;
    try {
      value = await cell();
    } catch (error) {
      onFailure(error);
      return;
    }
    onResult(value);
  }

  return function control(op, first, second, third) {
    if (op === "start") {
      runCell(first);
      return "started";
    }
    if (op === "settle") return settle(first, second, third);
    return "unknown";
  };
}

/** The prelude as source text for `evalCode`: an expression that evaluates to the function. */
export const GUEST_PRELUDE_SOURCE = `(${guestPrelude.toString()})`;

/**
 * The prelude's bytecode, compiled in `vm` (the build, scripts/build-prelude-bytecode.mjs, and a worker
 * without usable shipped bytecode both call this, so both make the same bytes). Compiled without its
 * source text: QuickJS otherwise keeps every prelude function's source in the heap, and each snapshot
 * carries it.
 * @param {import("quickjs-wasi").QuickJS} vm
 */
export function compileGuestPrelude(vm) {
  return vm.compile(GUEST_PRELUDE_SOURCE, "prelude.js", 0, CompileFlags.STRIP_SOURCE);
}

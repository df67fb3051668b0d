import { type Child, element } from "./dom.js";

export type JsonTreeOptions = {
  /** Objects and arrays this deep (0 = the root) start open; deeper ones start closed. */
  openDepth?: number;
};

const MAX_CHILDREN = 500;

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

function primitive(value: unknown): HTMLElement {
  const kind = typeName(value);
  const text = kind === "string" ? JSON.stringify(value) : kind === "undefined" ? "undefined" : String(value);
  return element("span", { className: `json-${kind}` }, text);
}

function summary(value: object): string {
  if (Array.isArray(value)) return value.length === 1 ? "[1 item]" : `[${value.length} items]`;
  const keys = Object.keys(value).length;
  return keys === 1 ? "{1 key}" : `{${keys} keys}`;
}

function node(key: Child, value: unknown, depth: number, options: Required<JsonTreeOptions>): HTMLElement {
  const label = key === null ? null : element("span", { className: "json-key" }, key, ": ");
  if (value === null || typeof value !== "object") {
    return element("div", { className: "json-row" }, label, primitive(value));
  }
  const entries: Array<[string, unknown]> = Array.isArray(value)
    ? value.map((item, index) => [String(index), item])
    : Object.entries(value);
  if (entries.length === 0) {
    return element(
      "div",
      { className: "json-row" },
      label,
      element("span", { className: "json-empty" }, Array.isArray(value) ? "[]" : "{}"),
    );
  }
  const details = element(
    "details",
    { className: "json-node", open: depth <= options.openDepth },
    element("summary", {}, label, element("span", { className: "json-summary" }, summary(value))),
  );
  const body = element("div", { className: "json-children" });
  for (const [childKey, childValue] of entries.slice(0, MAX_CHILDREN)) {
    body.appendChild(node(childKey, childValue, depth + 1, options));
  }
  if (entries.length > MAX_CHILDREN) {
    body.appendChild(
      element("div", { className: "json-more" }, `… ${entries.length - MAX_CHILDREN} more not shown`),
    );
  }
  details.appendChild(body);
  return details;
}

/**
 * A JSON value as a collapsible tree built from native `<details>` elements, so it opens and closes with
 * the keyboard and needs no script of its own. Scalars render inline with a class per JSON type.
 */
export function renderJsonTree(value: unknown, options: JsonTreeOptions = {}): HTMLElement {
  const resolved = { openDepth: options.openDepth ?? 1 };
  return element("div", { className: "json-tree" }, node(null, value, 0, resolved));
}

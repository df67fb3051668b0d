import { CodeModeError, type JsonObject } from "@codecell/contract";

type Schema = {
  properties?: Record<string, { default?: unknown; description?: unknown }>;
  required?: unknown;
};

/**
 * A tool's input made ready to send: `undefined` becomes `{}`, missing keys that the schema gives a
 * top-level `default` are filled in, and every required key must be present. Anything that is not one
 * plain object is `invalid_input`.
 */
export function prepareToolInput(label: string, schema: unknown, input: unknown): JsonObject {
  if (input === undefined) input = {};
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    const got = input === null ? "null" : Array.isArray(input) ? "an array" : `a ${typeof input}`;
    throw new CodeModeError(
      "invalid_input",
      `${label} takes one object argument, like ${label}({ ... }); got ${got}.`,
      {
        tool: label,
      },
    );
  }
  const prepared: Record<string, unknown> = { ...(input as Record<string, unknown>) };
  const shape = (typeof schema === "object" && schema !== null ? schema : {}) as Schema;
  const properties =
    typeof shape.properties === "object" && shape.properties !== null ? shape.properties : {};
  for (const [key, property] of Object.entries(properties)) {
    if (
      prepared[key] === undefined &&
      typeof property === "object" &&
      property !== null &&
      "default" in property
    ) {
      prepared[key] = structuredClone(property.default);
    }
  }
  const required = Array.isArray(shape.required)
    ? shape.required.filter((key) => typeof key === "string")
    : [];
  const missing = required.filter((key) => prepared[key] === undefined);
  if (missing.length > 0) {
    const described = missing.map((key) => {
      const description = properties[key]?.description;
      return typeof description === "string" ? `"${key}" (${description})` : `"${key}"`;
    });
    throw new CodeModeError(
      "invalid_input",
      `${label} is missing the required key${missing.length === 1 ? "" : "s"} ${described.join(", ")}.`,
      { tool: label, missing },
    );
  }
  return prepared as JsonObject;
}

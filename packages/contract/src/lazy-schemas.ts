import { createRequire } from "node:module";
import type * as Zod from "zod";
import { type ContractSchemas, defineContractSchemas } from "./schema-definitions.js";

let schemas: ContractSchemas | undefined;

/**
 * The contract's zod schemas, with zod loaded on first use. Importing zod costs about half of the
 * engine's import CPU (some 95 modules), and the common case (a valid config, a well-formed exec input)
 * is checked by hand without it; only the path that explains a refusal needs zod. The load is
 * synchronous (zod ships a CommonJS build), so the parsers keep their synchronous signatures.
 */
export function schemasOnDemand(): ContractSchemas {
  schemas ??= defineContractSchemas((createRequire(import.meta.url)("zod") as typeof Zod).z);
  return schemas;
}

import { CodeModeError } from "@codecell/contract";

/** Names one host record: what it is (`kind`), whose it is (`owner`, a principal) and which (`id`). */
export type HostRecordKey = { kind: string; owner: string; id: string };

/** One backend key per (kind, owner, id); each part encoded, so no owner can spell another's key. */
export function hostRecordKey(key: HostRecordKey, where: string): string {
  const parts = [key?.kind, key?.owner, key?.id];
  for (const [index, part] of parts.entries()) {
    if (typeof part !== "string" || part.length === 0 || part.length > 1024) {
      throw new CodeModeError(
        "invalid_input",
        `${where}: ${["kind", "owner", "id"][index]} must be a string of 1 to 1024 characters`,
      );
    }
  }
  return parts.map((part) => encodeURIComponent(part as string)).join("/");
}

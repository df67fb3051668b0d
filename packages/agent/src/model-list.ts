import type { ModelUpstream } from "./turn.js";

/**
 * `GET /v1/models` of the agent endpoint: the upstream's own list, or the configured model when the
 * upstream has none (a server without that path, or one that is down). Each entry carries the fields
 * of both APIs' model objects (OpenAI's `object`, `owned_by`, `created`; Anthropic's `type`,
 * `display_name`, `created_at`), so either API's client reads the list.
 */
export async function modelList(
  upstream: ModelUpstream,
  defaultModel: string | undefined,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  const answer = (await upstream.models?.(signal)) as { data?: unknown } | null | undefined;
  const listed = Array.isArray(answer?.data)
    ? (answer.data as Array<Record<string, unknown>>).filter((entry) => typeof entry?.id === "string")
    : [];
  const entries = listed.length > 0 ? listed : defaultModel ? [{ id: defaultModel }] : [];
  const data = entries.map((entry) => {
    const created =
      typeof entry.created === "number"
        ? entry.created
        : typeof entry.created_at === "string"
          ? Math.floor(Date.parse(entry.created_at) / 1000) || 0
          : 0;
    return {
      id: entry.id,
      object: "model",
      created,
      owned_by: typeof entry.owned_by === "string" ? entry.owned_by : (upstream.providerName ?? "upstream"),
      type: "model",
      display_name: typeof entry.display_name === "string" ? entry.display_name : entry.id,
      created_at: new Date(created * 1000).toISOString(),
    };
  });
  return {
    object: "list",
    data,
    has_more: false,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
  };
}

import { CodeModeError } from "@codecell/contract";

/** How a session reaches its MCP client to ask for approval. */
export interface ApprovalClient {
  /** True when the client declared the MCP elicitation capability. */
  canElicit(): boolean;
  /**
   * Why this client cannot be asked, for the refusal the cell gets (what follows "needs the user's
   * approval (tools.approval), but"); default: an MCP client without elicitation.
   */
  readonly cannotAsk?: string;
  /** Asks the user; resolves to true only on an explicit approval. */
  askApproval(message: string, signal: AbortSignal): Promise<boolean>;
}

/** A client that cannot be asked: every call that needs approval is refused. */
export const NO_APPROVAL_CLIENT: ApprovalClient = {
  canElicit: () => false,
  askApproval: async () => false,
};

/**
 * Gets the decision for one nested call. A refusal throws, so the guest sees a catchable error and the
 * trajectory records the failed call with the reason.
 */
export async function requireApproval(
  client: ApprovalClient,
  toolId: string,
  input: unknown,
  signal: AbortSignal,
): Promise<void> {
  if (!client.canElicit()) {
    throw new CodeModeError(
      "nested_tool_failed",
      `Calling ${toolId} needs the user's approval (tools.approval), but ${client.cannotAsk ?? "the connected MCP client cannot be asked: it does not support elicitation"}. The call was not made.`,
      { toolId, approval: "unavailable" },
    );
  }
  const shown = JSON.stringify(input);
  const message = `Allow the code-mode cell to call ${toolId} with ${shown.length > 500 ? `${shown.slice(0, 497)}...` : shown}?`;
  let approved: boolean;
  try {
    approved = await client.askApproval(message, signal);
  } catch (error) {
    throw new CodeModeError(
      "nested_tool_failed",
      `Calling ${toolId} needs approval, and asking the client failed: ${(error as Error).message}. The call was not made.`,
      { toolId, approval: "error" },
    );
  }
  if (!approved) {
    throw new CodeModeError(
      "nested_tool_failed",
      `The user declined the call to ${toolId}. The call was not made.`,
      {
        toolId,
        approval: "declined",
      },
    );
  }
}

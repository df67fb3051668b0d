import { CodeModeError, type JsonValue } from "@codecell/contract";
import type { ToolCallRequest } from "../sessions/session-host.js";

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
  /**
   * For a client that is asked by answering its request (an input-required result) rather than by a
   * request of the server's own: the nested call has been handed out of its run, and the decision
   * comes with the client's retry (see deferred-approvals.ts). Absent: `askApproval` is used.
   */
  defer?(approval: {
    runId: string;
    callId: string;
    message: string;
    request: ToolCallRequest;
    /** The input to run with (after the `before_tool_call` hooks). */
    input: JsonValue;
  }): void;
}

/** What became of a call that needs approval: approved now, or left to the client's retry. */
export type ApprovalDecision = "approved" | "deferred";

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
  request: ToolCallRequest,
  input: unknown,
): Promise<ApprovalDecision> {
  const { toolId, signal } = request;
  if (!client.canElicit()) {
    throw new CodeModeError(
      "nested_tool_failed",
      `Calling ${toolId} needs the user's approval (tools.approval), but ${client.cannotAsk ?? "the connected MCP client cannot be asked: it does not support elicitation"}. The call was not made.`,
      { toolId, approval: "unavailable" },
    );
  }
  const shown = JSON.stringify(input);
  const message = `Allow the code-mode cell to call ${toolId} with ${shown.length > 500 ? `${shown.slice(0, 497)}...` : shown}?`;
  if (client.defer && request.handOut) {
    const { runId, callId } = request.handOut();
    client.defer({ runId, callId, message, request, input: input as JsonValue });
    return "deferred";
  }
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
  return "approved";
}

export { AgentError, type AgentErrorKind } from "./agent-error.js";
export {
  AgentLoop,
  type AgentLoopOptions,
  type AgentTurnRequest,
  type AgentTurnResult,
  type HostRunTools,
} from "./agent-loop.js";
export { fromMessagesUsage, messagesErrorBody, type UpstreamApi } from "./anthropic-messages.js";
export {
  type ChatCompletionsContext,
  ChatCompletionsFront,
  type ChatCompletionsFrontOptions,
  openAiErrorBody,
  type ResponseSink,
} from "./chat-completions-front.js";
export { conversationHash } from "./conversation-key.js";
export {
  type ConversationRecord,
  type ConversationStore,
  type HandedOutCall,
  snapshotStoreConversations,
} from "./conversation-store.js";
export {
  FINISH_REASONS,
  type FinishReason,
  fromWireFinish,
  toWireFinish,
  type WireApi,
} from "./finish-reasons.js";
export {
  type AgentLimits,
  checkClientToolCount,
  checkClientTools,
  DEFAULT_LIMITS,
  jsonDepth,
  type RequestLimits,
  type UpstreamLimits,
} from "./limits.js";
export { MessagesFront, type MessagesFrontOptions, messagesParams } from "./messages-front.js";
export { DEFAULT_MAX_TOKENS, MessagesUpstream, type MessagesUpstreamOptions } from "./messages-upstream.js";
export { modelList } from "./model-list.js";
export { OpenAiUpstream, type OpenAiUpstreamOptions } from "./openai-upstream.js";
export {
  type ResponseStore,
  type StoredResponse,
  snapshotStoreResponses,
} from "./response-store.js";
export { DROPPED_TOOLS_HEADER, ResponsesFront, type ResponsesFrontOptions } from "./responses-front.js";
export type { HostedToolPolicy } from "./responses-tools.js";
export { ResponsesUpstream, type ResponsesUpstreamOptions } from "./responses-upstream.js";
export type {
  ModelCallOptions,
  ModelReply,
  ModelRequest,
  ModelUpstream,
  TurnContent,
  TurnImage,
  TurnMessage,
  TurnTool,
  TurnToolCall,
  TurnUsage,
} from "./turn.js";
export type { UpstreamDebug } from "./upstream-debug.js";
export type { UpstreamResponse } from "./upstream-transport.js";

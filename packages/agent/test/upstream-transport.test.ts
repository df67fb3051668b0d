import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ModelRequest, OpenAiUpstream } from "../src/index.js";
import { type ScriptedUpstream, startScriptedUpstream } from "../src/testing/scripted-upstream.js";
import { failure, until } from "./support.js";

// The HTTP side the Chat Completions and Messages upstreams share (upstream-transport.ts), driven
// through OpenAiUpstream against the scripted server.

const request: ModelRequest = {
  model: "m",
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  codeModeDirectOnly: null,
  params: {},
};

describe("the upstream transport", () => {
  let upstream: ScriptedUpstream;
  beforeAll(async () => {
    upstream = await startScriptedUpstream();
  });
  afterAll(async () => {
    await upstream.close();
  });

  it("keeps its connection alive across model calls, streamed or not", async () => {
    const model = new OpenAiUpstream({ baseUrl: upstream.baseUrl });
    const before = upstream.connections();
    for (let call = 0; call < 6; call++) {
      upstream.script({ text: `answer ${call}` });
      const reply = await model.complete(request, {
        signal: new AbortController().signal,
        ...(call % 2 ? { onTextDelta: () => {} } : {}),
      });
      expect(reply.content).toBe(`answer ${call}`);
    }
    // Six calls, one connection: each answer, streamed ones too, is read to its end and the connection kept.
    expect(upstream.connections() - before).toBe(1);
  });

  it("ends the upstream request when the caller aborts, and says it was cancelled", async () => {
    const model = new OpenAiUpstream({ baseUrl: upstream.baseUrl });
    const abandoned = upstream.abandoned();
    upstream.script({ hang: true });
    const controller = new AbortController();
    const received = upstream.bodies.length;
    const call = model.complete(request, { signal: controller.signal });
    // Aborted once the upstream holds the request, so the abort has a connection to end.
    await until(() => upstream.bodies.length > received);
    controller.abort();
    expect((await failure(call)).kind).toBe("aborted");
    await until(() => upstream.abandoned() === abandoned + 1);
  });

  it("gives up at timeoutMs and closes the connection, so the next call gets a fresh one that works", async () => {
    const model = new OpenAiUpstream({ baseUrl: upstream.baseUrl, timeoutMs: 150 });
    const abandoned = upstream.abandoned();
    upstream.script({ hang: true }, { text: "after the timeout" });
    const error = await failure(model.complete(request, { signal: new AbortController().signal }));
    expect(error.kind).toBe("upstream_unavailable");
    expect(error.message).toContain("did not answer within 150 ms");
    await until(() => upstream.abandoned() === abandoned + 1);
    const reply = await model.complete(request, { signal: new AbortController().signal });
    expect(reply.content).toBe("after the timeout");
  });

  it("reports a server that is not there by its error code", async () => {
    const model = new OpenAiUpstream({ baseUrl: "http://127.0.0.1:9/v1" });
    const error = await failure(model.complete(request, { signal: new AbortController().signal }));
    expect(error.kind).toBe("upstream_unavailable");
    expect(error.message).toContain("could not be reached (ECONNREFUSED)");
  });
});

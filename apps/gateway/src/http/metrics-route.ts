import type { IncomingMessage, ServerResponse } from "node:http";
import type { Gateway } from "../gateway.js";
import { type AuthOutcome, bearerChallenge } from "./http-auth.js";

/**
 * `GET /metrics`: the gateway's instruments in Prometheus text format (prom-client's registry, see
 * telemetry/gateway-metrics.ts). Behind the bearer token like every route but /healthz: the labels name
 * downstream servers and the counts tell what runs here.
 */
export async function serveMetrics(
  gateway: Gateway,
  req: IncomingMessage,
  res: ServerResponse,
  auth: AuthOutcome,
): Promise<void> {
  if (!auth.ok) {
    res
      .writeHead(401, {
        "content-type": "application/json",
        "www-authenticate": bearerChallenge(auth.reason),
      })
      .end(
        JSON.stringify({
          error:
            auth.reason === "missing"
              ? "/metrics needs a bearer token: send Authorization: Bearer <token> (a Prometheus scrape config sets it with authorization.credentials)."
              : "The bearer token is not valid.",
        }),
      );
    return;
  }
  if (req.method !== "GET" && req.method !== "HEAD") {
    res
      .writeHead(405, { "content-type": "application/json", allow: "GET, HEAD" })
      .end(JSON.stringify({ error: "Only GET is served at /metrics." }));
    return;
  }
  const metrics = await gateway.enableMetrics();
  const body = await metrics.render();
  res.writeHead(200, { "content-type": metrics.contentType });
  res.end(req.method === "HEAD" ? undefined : body);
}

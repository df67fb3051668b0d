import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";

// An OTLP/HTTP collector for tests: it accepts POST /v1/traces and /v1/metrics in both encodings the
// gateway exports (http/protobuf and http/json) and decodes what it gets. Protobuf is decoded with the
// protobufjs code generated from the published OTLP protos that @opentelemetry/otlp-transformer 0.200
// ships (its generated root); JSON is OTLP's own JSON mapping.

const require = createRequire(import.meta.url);
type Decoder = { decode(bytes: Uint8Array): unknown; toObject(message: unknown, options: object): unknown };
const root = require("@opentelemetry/otlp-transformer/build/src/generated/root.js") as {
  opentelemetry: {
    proto: {
      collector: {
        trace: { v1: { ExportTraceServiceRequest: Decoder } };
        metrics: { v1: { ExportMetricsServiceRequest: Decoder } };
      };
    };
  };
};
const { collector } = root.opentelemetry.proto;

/** A span as the tests read it, whatever the encoding. */
export type ReceivedSpan = {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code: number; message?: string };
  resource: Record<string, unknown>;
  scope: string;
};

/** One metric data point: a sum's value, or a histogram's count. */
export type ReceivedPoint = { metric: string; attributes: Record<string, unknown>; value: number };

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};
type KeyValue = { key: string; value?: AnyValue };

function anyValue(value: AnyValue | undefined): unknown {
  if (!value) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(anyValue);
  return undefined;
}

function attributes(list: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((entry) => [entry.key, anyValue(entry.value)]));
}

/** Ids: bytes in protobuf (made hex here), hex strings in the JS exporter's JSON. */
function hex(id: unknown): string {
  if (id === undefined || id === null) return "";
  if (typeof id === "string") return id;
  return Buffer.from(id as Uint8Array).toString("hex");
}

type Request = { resourceSpans?: unknown[]; resourceMetrics?: unknown[] };

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly points: ReceivedPoint[] = [];
  /** Content types of the requests, one per request, by signal. */
  readonly contentTypes: Array<{ signal: string; contentType: string }> = [];
  readonly #server: Server;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver | undefined;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        try {
          receiver!.#accept(req.url ?? "", req.headers["content-type"] ?? "", Buffer.concat(chunks));
          res.writeHead(200, { "content-type": req.headers["content-type"] ?? "application/json" }).end();
        } catch (error) {
          res.writeHead(400).end(String(error));
        }
      });
    });
    receiver = new OtlpReceiver(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  #accept(path: string, contentType: string, body: Buffer): void {
    const signal = path.endsWith("/v1/traces") ? "traces" : path.endsWith("/v1/metrics") ? "metrics" : null;
    if (signal === null) throw new Error(`unexpected path ${path}`);
    this.contentTypes.push({ signal, contentType });
    const json = contentType.includes("json");
    const decoder =
      signal === "traces"
        ? collector.trace.v1.ExportTraceServiceRequest
        : collector.metrics.v1.ExportMetricsServiceRequest;
    const request = (
      json
        ? JSON.parse(body.toString("utf8"))
        : decoder.toObject(decoder.decode(body), { longs: String, enums: Number, defaults: false })
    ) as Request;
    if (signal === "traces") this.#spans(request);
    else this.#metrics(request);
  }

  #spans(request: Request): void {
    for (const resourceSpans of (request.resourceSpans ?? []) as Array<{
      resource?: { attributes?: KeyValue[] };
      scopeSpans?: Array<{ scope?: { name?: string }; spans?: Array<Record<string, unknown>> }>;
    }>) {
      const resource = attributes(resourceSpans.resource?.attributes);
      for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
        for (const span of scopeSpans.spans ?? []) {
          const status = (span.status ?? {}) as { code?: number; message?: string };
          this.spans.push({
            name: String(span.name),
            traceId: hex(span.traceId),
            spanId: hex(span.spanId),
            parentSpanId: hex(span.parentSpanId),
            kind: Number(span.kind ?? 0),
            attributes: attributes(span.attributes as KeyValue[] | undefined),
            status: {
              code: Number(status.code ?? 0),
              ...(status.message ? { message: status.message } : {}),
            },
            resource,
            scope: scopeSpans.scope?.name ?? "",
          });
        }
      }
    }
  }

  #metrics(request: Request): void {
    for (const resourceMetrics of (request.resourceMetrics ?? []) as Array<{
      scopeMetrics?: Array<{ metrics?: Array<Record<string, unknown>> }>;
    }>) {
      for (const scopeMetrics of resourceMetrics.scopeMetrics ?? []) {
        for (const metric of scopeMetrics.metrics ?? []) {
          const data = (metric.sum ?? metric.gauge ?? metric.histogram) as
            | { dataPoints?: Array<Record<string, unknown>> }
            | undefined;
          for (const point of data?.dataPoints ?? []) {
            const value = point.asInt ?? point.asDouble ?? point.count;
            this.points.push({
              metric: String(metric.name),
              attributes: attributes(point.attributes as KeyValue[] | undefined),
              value: Number(value ?? 0),
            });
          }
        }
      }
    }
  }

  /** Waits (bounded) until `ready` holds over what arrived. */
  async until(ready: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!ready()) {
      if (Date.now() > deadline) throw new Error(`the collector did not get ${what} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

// A real HTTP receiver for push deliveries (and alerts): records every request, verifies every signature
// with node:crypto (independently of corq's own signing code), and fails, stalls or acks
// partially on demand.
import { afterAll, beforeAll } from "vitest";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createHmac, timingSafeEqual } from "node:crypto";
import type { DeliveredEvent } from "../../src/index.js";

export interface Delivery {
  id: string;
  timestamp: number;
  signatureValid: boolean;
  subscription: string;
  incarnation: string;
  key: string;
  attempt: number;
  events: DeliveredEvent[];
  receivedAt: number;
  finishedAt?: number;
  /** The request's path and query. */
  url: string;
  /** The body as sent (an alert's payload has no events). */
  body: Record<string, unknown>;
  /** The request's headers (lower-case names). */
  headers: Record<string, string | string[] | undefined>;
}

/**
 * What the receiver answers: `status` (200), `body` (JSON-encoded) or `raw` (sent as is),
 * `contentType` (application/json), more `headers`, after `delayMs`; `stallMs` sends the headers and the first
 * half of the body, then waits that long before the rest. A 1xx `status` is sent alone, then
 * the connection ends.
 */
export type Behaviour = (delivery: Delivery) =>
  | {
      status?: number;
      body?: unknown;
      raw?: string;
      contentType?: string;
      headers?: Record<string, string>;
      delayMs?: number;
      stallMs?: number;
    }
  | undefined;

export async function startReceiver(secret: () => string | undefined) {
  const deliveries: Delivery[] = [];
  let behave: Behaviour = () => undefined;
  let inFlight = new Map<string, number>();
  let overlaps = 0;

  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    const body = JSON.parse(raw);
    const id = String(request.headers["webhook-id"]);
    const timestamp = Number(request.headers["webhook-timestamp"]);
    const delivery: Delivery = {
      id,
      timestamp,
      signatureValid: verify(secret(), id, timestamp, raw, String(request.headers["webhook-signature"] ?? "")),
      subscription: body.subscription,
      incarnation: body.incarnation,
      key: body.key,
      attempt: body.attempt,
      events: body.events,
      receivedAt: Date.now(),
      url: request.url ?? "",
      body,
      headers: request.headers,
    };
    deliveries.push(delivery);
    const slot = `${delivery.subscription}/${delivery.key}`;
    if (inFlight.get(slot)) overlaps++;
    inFlight.set(slot, (inFlight.get(slot) ?? 0) + 1);
    const plan = behave(delivery) ?? {};
    if (plan.delayMs) await new Promise((resolve) => setTimeout(resolve, plan.delayMs));
    inFlight.set(slot, inFlight.get(slot)! - 1);
    delivery.finishedAt = Date.now();
    if (response.destroyed) return;
    if (plan.status !== undefined && plan.status < 200) {
      // an informational answer and no final one: the connection ends after it
      response.socket?.end(`HTTP/1.1 ${plan.status} Informational\r\n\r\n`);
      return;
    }
    const text = plan.raw ?? (plan.body === undefined ? "" : JSON.stringify(plan.body));
    response.writeHead(plan.status ?? 200, {
      "content-type": plan.contentType ?? "application/json",
      ...plan.headers,
    });
    if (plan.stallMs) {
      response.write(text.slice(0, text.length / 2));
      await new Promise((resolve) => setTimeout(resolve, plan.stallMs));
      if (response.destroyed) return;
      response.end(text.slice(text.length / 2));
    } else {
      response.end(text);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    get overlaps() {
      return overlaps;
    },
    behave(fn: Behaviour) {
      behave = fn;
    },
    reset() {
      deliveries.length = 0;
      inFlight = new Map();
      overlaps = 0;
      behave = () => undefined;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/**
 * A receiver for one test file: started before its tests, closed after. Deliveries are
 * verified with `hook.secret` (set it from the subscription's answer).
 */
export function useReceiver(): { receiver: Receiver; secret: string | undefined } {
  const hook = { secret: undefined } as { receiver: Receiver; secret: string | undefined };
  beforeAll(async () => (hook.receiver = await startReceiver(() => hook.secret)));
  afterAll(() => hook.receiver.close());
  return hook;
}

function verify(secret: string | undefined, id: string, timestamp: number, body: string, header: string): boolean {
  if (!secret) return false;
  const key = secret.startsWith("whsec_") ? Buffer.from(secret.slice(6), "base64") : Buffer.from(secret, "utf8");
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest();
  return header.split(" ").some((entry) => {
    if (!entry.startsWith("v1,")) return false;
    const given = Buffer.from(entry.slice(3), "base64");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/** Per key, the positions of first deliveries in delivery order (redeliveries of a position dropped). */
export function firstDeliveries(deliveries: Delivery[]): Map<string, number[]> {
  const byKey = new Map<string, number[]>();
  for (const d of deliveries) {
    const seen = byKey.get(d.key) ?? [];
    for (const e of d.events) if (!seen.includes(e.position)) seen.push(e.position);
    byKey.set(d.key, seen);
  }
  return byKey;
}

/** The most deliveries in flight at one moment. */
export function peakInFlight(spans: { receivedAt: number; finishedAt?: number }[]): number {
  const edges = spans.flatMap((s) => [[s.receivedAt, 1] as const, [s.finishedAt ?? Infinity, -1] as const]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let peak = 0;
  for (const [, step] of edges) {
    now += step;
    peak = Math.max(peak, now);
  }
  return peak;
}

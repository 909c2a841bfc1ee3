// Push delivery: a claimed batch is POSTed to the subscription's URL, signed the Standard
// Webhooks way (docs/http-api.md, "Push delivery"). Any 2xx acks the batch, or the prefix through
// `{ "ackedThrough": p }`; anything else — non-2xx, a redirect, a timeout, a network error —
// is a failed attempt. Runs on fetch, so the same code delivers from Node and from Workers.
import { z } from "zod";
import { sign } from "./webhookSignature.js";
import type { Handler, StoredEvent } from "./types.js";

export const deliverConfig = z.object({
  url: z
    .string()
    .max(2048)
    .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), "must be an http: or https: URL"),
  timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  secret: z.string().min(1).max(500).optional(),
});

export type DeliverConfig = z.output<typeof deliverConfig>;

/** Receivers answer with a small JSON body at most; anything larger is cut here. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * The same batch (same subscription, key, first and last position) gets the same id on every
 * retry, so receivers can deduplicate.
 */
export async function webhookId(subscription: string, key: string, events: StoredEvent[]): Promise<string> {
  const identity = [subscription, key, events[0].position, events[events.length - 1].position].join("\u0000");
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(identity)));
  return `msg_${[...digest.slice(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export function pushHandler(stored: unknown): Handler {
  const deliver = deliverConfig.required({ secret: true }).parse(stored);
  return async (events, context) => {
    const body = JSON.stringify({ subscription: context.subscription, key: context.key, attempt: context.attempt, events });
    const id = await webhookId(context.subscription, context.key, events);
    const timestamp = Math.floor(Date.now() / 1000);
    const timeout = AbortSignal.timeout(deliver.timeoutMs);
    let response: Response;
    try {
      response = await fetch(deliver.url, {
        method: "POST",
        redirect: "manual",
        signal: timeout,
        headers: {
          "content-type": "application/json",
          "user-agent": "corq",
          "webhook-id": id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": await sign(deliver.secret, { id, timestamp, body }),
        },
        body,
      });
    } catch (error) {
      if (timeout.aborted) throw new Error(`delivery timed out after ${deliver.timeoutMs} ms`);
      throw new Error(`delivery failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    const text = await readCapped(response, MAX_RESPONSE_BYTES, timeout);
    if (response.status < 200 || response.status > 299) {
      throw new Error(`receiver answered ${response.status}${text ? `: ${text.slice(0, 200)}` : ""}`);
    }
    const through = ackedThrough(text);
    return through === undefined ? undefined : { ackedThrough: through };
  };
}

/** `{ "ackedThrough": <position> }` in a 2xx body acks a prefix; any other body acks all. */
function ackedThrough(text: string): number | undefined {
  try {
    const value = (JSON.parse(text) as { ackedThrough?: unknown } | null)?.ackedThrough;
    return typeof value === "number" ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Reads at most `max` bytes of the body (then cancels the rest), within the delivery timeout. */
async function readCapped(response: Response, max: number, signal: AbortSignal): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < max) {
      if (signal.aborted) throw new Error("delivery timed out while reading the response");
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  const bytes = new Uint8Array(Math.min(size, max));
  let offset = 0;
  for (const chunk of chunks) {
    const part = chunk.subarray(0, bytes.length - offset);
    bytes.set(part, offset);
    offset += part.length;
  }
  return new TextDecoder().decode(bytes);
}

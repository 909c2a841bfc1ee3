// Push delivery: a claimed batch is POSTed to the subscription's URL, signed the Standard
// Webhooks way (docs/http-api.md, "Push delivery"). A 2xx acks the batch, or the prefix through
// `{ "ackedThrough": p }` (see `verdict`); anything else — non-2xx, a redirect, a timeout, a
// network error — is a failed attempt. Runs on fetch (pushTransport.ts: the runtime's in
// Workers, undici's in Node), so the same code delivers from Node and from Workers.
import { z } from "zod";
import { sign, signingSecretProblem } from "./webhookSignature.js";
import { PrivateDestinationError } from "./privateAddress.js";
import { present } from "./errors.js";
import { pushTransportOf } from "./pushTransport.js";
import type { DeliveredEvent, Handler, HandlerResult } from "./types.js";

export const deliverConfig = z.object({
  url: z
    .string()
    .max(2048)
    .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), "must be an http: or https: URL")
    // credentials in a URL end up in logs and listings: a receiver authenticates by the signature
    .refine(
      (u) => !URL.canParse(u) || (new URL(u).username === "" && new URL(u).password === ""),
      "must not contain a user name or password",
    ),
  /** Omitted: pushSubscriptionInput derives it from leaseMs (`defaultTimeoutMs`). */
  timeoutMs: z.number().int().min(100).max(120_000).optional(),
  secret: z
    .string()
    .min(1)
    .max(500)
    .superRefine((secret, ctx) => {
      const problem = signingSecretProblem(secret);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    })
    .optional(),
});

/** What a claim hands the push handler: the settings as stored (checked at PUT, read leniently). */
const storedDeliver = z.object({ url: z.string(), timeoutMs: z.number().int().min(1), secret: z.string() });

export type DeliverConfig = z.output<typeof deliverConfig>;

/** 10 s, or half the lease when that is shorter (a lease must outlive its delivery), at least 100 ms. */
export const defaultTimeoutMs = (leaseMs: number) => Math.max(100, Math.min(10_000, Math.floor(leaseMs / 2)));

/** Receivers answer with a small JSON body at most; a larger JSON answer fails the attempt. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * One id per attempt series: the batches of a key that start at the same queue entry (its
 * seq, in this incarnation of the subscription). A failed batch is retried from its first
 * event (after a failure, that event alone), so every retry carries the first attempt's id;
 * the next id comes once that event is acked. It says "this is the same delivery again", not
 * which events are new: receivers deduplicate events by their `seq` ("seq <= last seen"),
 * never by the id. An event queued again by a rewind has a new seq, so its batch a new id.
 */
export async function webhookId(
  subscription: { name: string; incarnation: string },
  key: string,
  events: DeliveredEvent[],
): Promise<string> {
  // a delivered batch is never empty: its first seq names it
  const identity = [
    subscription.name,
    subscription.incarnation,
    key,
    present(events[0], "the batch's first event").seq,
  ].join("\u0000");
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(identity)));
  return `msg_${[...digest.slice(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export function pushHandler(stored: unknown): Handler {
  return async (events, context) => {
    // inside the handler: a row that does not parse is a failed attempt, not an error thrown
    // out of the claim
    const parsed = storedDeliver.safeParse(stored);
    if (!parsed.success) throw new DeliveryError("the stored deliver settings are not valid");
    const deliver = parsed.data;
    const body = JSON.stringify({
      subscription: context.subscription,
      incarnation: context.incarnation,
      key: context.key,
      attempt: context.attempt,
      events,
    });
    const id = await webhookId({ name: context.subscription, incarnation: context.incarnation }, context.key, events);
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = await sign(deliver.secret, { id, timestamp, body }).catch(() => {
      throw new DeliveryError("the signing secret is not valid");
    });
    // one deadline for the whole exchange: connecting, the answer's headers and its body
    const timeout = AbortSignal.timeout(deliver.timeoutMs);
    const signal = AbortSignal.any([timeout, context.signal]);
    try {
      const response = await pushTransportOf(context.corq).fetch(deliver.url, {
        method: "POST",
        redirect: "manual",
        signal,
        headers: {
          "content-type": "application/json",
          "user-agent": "corq",
          "webhook-id": id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signature,
          // the batch's `process` span (src/tracing.ts): the receiver's spans join the trace
          ...context.trace,
        },
        body,
      });
      return await verdict(response, signal);
    } catch (error) {
      // lastError keeps a status or a short reason of ours, never the receiver's or the
      // network stack's words: refused, reset, unresolvable and not-HTTP all read the same,
      // so a subscription cannot be used to tell closed ports from open ones
      if (timeout.aborted) throw new DeliveryError(`timeout after ${deliver.timeoutMs} ms`);
      if (context.signal.aborted) throw new DeliveryError("lease expired");
      if (error instanceof DeliveryError) throw error;
      const refused = causes(error).find((e) => e instanceof PrivateDestinationError);
      if (refused) throw new DeliveryError(`destination refused: ${refused.message} (CORQ_PUSH_ALLOW_PRIVATE)`);
      throw new DeliveryError("could not connect");
    }
  };
}

/** The error and its causes (fetch wraps what failed below it as `cause`). */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e = error; e != null && chain.length < 10; e = (e as { cause?: unknown }).cause) chain.push(e);
  return chain;
}

/** A failed delivery in words of ours: a status or a short reason (what lastError keeps). */
class DeliveryError extends Error {}

/**
 * What an answer means. Non-2xx: a failed attempt. 2xx: the batch is acked, or the prefix
 * through `{ "ackedThrough": … }`. A JSON answer (by content type) over 64 KiB or that does
 * not parse fails the attempt: we never ack all on a body we could not read. An answer of
 * another type is looked at only if it is small and parses; otherwise it acks all.
 */
async function verdict(response: Response, signal: AbortSignal): Promise<HandlerResult> {
  if (response.status < 200 || response.status > 299) {
    await response.body?.cancel().catch(() => undefined);
    const later = comeBackLater(response);
    if (later) return later;
    throw new DeliveryError(`HTTP ${response.status}`);
  }
  const json = /^\s*(application|text)\/([\w.+-]+\+)?json\s*(;|$)/i.test(response.headers.get("content-type") ?? "");
  const { text, tooLarge } = await readCapped(response, MAX_RESPONSE_BYTES, signal);
  if (tooLarge) {
    if (json) throw new DeliveryError(`response too large (over ${MAX_RESPONSE_BYTES / 1024} KiB)`);
    return undefined;
  }
  if (text.trim() === "") return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    if (json) throw new DeliveryError("response is not valid JSON");
    return undefined;
  }
  if (parsed === null || typeof parsed !== "object" || !Object.hasOwn(parsed, "ackedThrough")) return undefined;
  return parsed as { ackedThrough: number }; // the value is checked by consume's ackedThroughIndex
}

/**
 * A 429 (Too Many Requests) or 503 (Service Unavailable) with a `Retry-After` of delay-seconds
 * or an HTTP date (RFC 9110 §10.2.3) is "come back later": no attempt counted, the key waits
 * that long (capped: postponement() in consume/claimed.ts). Without the header, or with one that
 * does not parse, it is a failed attempt like any other status.
 */
function comeBackLater(response: Response): { retryAfterMs: number; reason: string } | undefined {
  if (response.status !== 429 && response.status !== 503) return undefined;
  const header = response.headers.get("retry-after")?.trim() ?? "";
  const seconds = /^\d{1,10}$/.test(header) ? Number(header) : undefined;
  const date = seconds === undefined && header !== "" ? Date.parse(header) : Number.NaN;
  const retryAfterMs =
    seconds !== undefined ? seconds * 1000 : Number.isFinite(date) ? Math.max(0, date - Date.now()) : undefined;
  if (retryAfterMs === undefined) return undefined;
  return {
    retryAfterMs,
    reason: `HTTP ${response.status}, Retry-After ${seconds !== undefined ? `${seconds} s` : "a date"}`,
  };
}

/**
 * Reads the body up to `max` bytes (then cancels the rest and says it was too large). Each read
 * races the signal, so a body that stalls ends at the deadline whatever the runtime's fetch does.
 */
async function readCapped(
  response: Response,
  max: number,
  signal: AbortSignal,
): Promise<{ text: string; tooLarge: boolean }> {
  if (!response.body) return { text: "", tooLarge: false };
  const reader = response.body.getReader();
  let onAbort = () => undefined as void;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), aborted]);
      if (done) break;
      size += value.length;
      if (size > max) return { text: "", tooLarge: true };
      chunks.push(value);
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
    reader.cancel().catch(() => undefined);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return { text: new TextDecoder().decode(bytes), tooLarge: false };
}

// One alert's POST, with the push transport's rules (CLARIFICATIONS: "delivered with the push
// transport's rules"): signed the Standard Webhooks way, through the push transport (the
// private-address refusal, by the URL's text and, on Node, by the address connected to),
// redirects not followed, one deadline for the whole exchange. A 2xx is taken; anything else
// fails the attempt, in words of ours (a status, a timeout, "could not connect"), never the
// receiver's or the network stack's — the same reasons a push delivery's lastError gives.
import { PrivateDestinationError } from "./privateAddress.js";
import type { PushTransport } from "./pushTransport.js";
import type { AlertPayload } from "./types.js";
import { sign } from "./webhookSignature.js";

/** How long a receiver has to answer an alert: the push subscriptions' default timeout. */
export const ALERT_TIMEOUT_MS = 10_000;

export async function sendAlert(
  transport: PushTransport,
  send: { url: string; secret: string; messageId: string; payload: AlertPayload },
): Promise<{ error: string | null }> {
  const body = JSON.stringify(inOrder(send.payload));
  const timestamp = Math.floor(Date.now() / 1000);
  let signature: string;
  try {
    signature = await sign(send.secret, { id: send.messageId, timestamp, body });
  } catch {
    return { error: "the signing secret is not valid" };
  }
  const timeout = AbortSignal.timeout(ALERT_TIMEOUT_MS);
  try {
    const response = await transport.fetch(send.url, {
      method: "POST",
      redirect: "manual",
      signal: timeout,
      headers: {
        "content-type": "application/json",
        "user-agent": "corq",
        "webhook-id": send.messageId,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signature,
      },
      body,
    });
    // the answer's body says nothing an alert needs
    await response.body?.cancel().catch(() => undefined);
    return { error: response.status >= 200 && response.status <= 299 ? null : `HTTP ${response.status}` };
  } catch (error) {
    if (timeout.aborted) return { error: `timeout after ${ALERT_TIMEOUT_MS} ms` };
    const refused = causes(error).find((e) => e instanceof PrivateDestinationError);
    if (refused) return { error: `destination refused: ${refused.message} (CORQ_PUSH_ALLOW_PRIVATE)` };
    return { error: "could not connect" };
  }
}

/** The payload's fields in the documented order (jsonb keeps them in its own); undefined ones are left out. */
function inOrder({ type, subscription, key, position, error, lag, at }: AlertPayload): AlertPayload {
  return { type, subscription, key, position, error, lag, at };
}

/** The error and its causes (fetch wraps what failed below it as `cause`). */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e = error; e != null && chain.length < 10; e = (e as { cause?: unknown }).cause) chain.push(e);
  return chain;
}

// corqueue/client (src/client.ts) builds every path from percent-encoded segments, and refuses
// before sending what a URL would fold into the path around it: "", "." and "..". Without that,
// pauseKey(subscription, "..") reached POST /subscriptions/<name>/pause — every key paused.
import { describe, expect, it } from "vitest";
import { createClient } from "../src/client.js";
import { CorqError } from "../src/errors.js";

function recordingClient(url = "http://127.0.0.1:1/") {
  const sent: string[] = [];
  const client = createClient({
    url,
    token: "t",
    // the transport: records the request and answers as the server would
    fetch: async (request) => {
      sent.push(`${request.method} ${new URL(request.url).pathname}`);
      return new Response(JSON.stringify({ ok: true }), {
        status: 200,
        headers: { "content-type": "application/json" },
      });
    },
  });
  return { client, sent };
}

describe("client path segments", () => {
  it("refuses '', '.' and '..' as a key, subscription or stream in every method that puts one in the path", async () => {
    const { client, sent } = recordingClient();
    for (const bad of ["", ".", ".."]) {
      const calls = [
        client.pauseKey("orders", bad),
        client.resumeKey("orders", bad),
        client.pauseKey(bad, "k1"),
        client.resumeKey(bad, "k1"),
        client.pause(bad),
        client.resume(bad),
        client.subscription(bad),
        client.deleteSubscription(bad),
        client.putSubscription(bad, { deliver: { url: "https://example.com/" } }),
        client.keys(bad),
        client.rewind(bad, { to: "beginning" }),
        client.consume(bad),
        client.append(bad, [{ name: "E", data: {} }]),
        client.readStream(bad),
        client.revokeToken(bad),
        client.putAlert(bad, { url: "https://example.com/", on: ["key.dead"] }),
        client.deleteAlert(bad),
      ];
      for (const call of calls) {
        await expect(call).rejects.toSatisfy(
          (error) => error instanceof CorqError && error.code === "invalid_input" && /path segment/.test(error.message),
        );
      }
    }
    expect(sent).toEqual([]);
  });

  it("percent-encodes every other key, dots inside it included", async () => {
    const { client, sent } = recordingClient();
    await client.pauseKey("orders", "a/b?c#d");
    await client.resumeKey("orders", "...");
    await client.pauseKey("orders", "./x");
    expect(sent).toEqual([
      "POST /subscriptions/orders/keys/a%2Fb%3Fc%23d/pause",
      "POST /subscriptions/orders/keys/.../resume",
      "POST /subscriptions/orders/keys/.%2Fx/pause",
    ]);
  });
});

describe("client under a prefix", () => {
  it("keeps the path of its URL (corq mounted at /corq), with or without a trailing slash", async () => {
    for (const url of ["http://127.0.0.1:1/corq", "http://127.0.0.1:1/corq/", "http://127.0.0.1:1/ops/queues?x=1"]) {
      const { client, sent } = recordingClient(url);
      await client.health();
      await client.pauseKey("orders", "a/b");
      await client.keys("orders", { limit: 5 });
      const prefix = url.includes("/ops/") ? "/ops/queues" : "/corq";
      expect(sent, url).toEqual([
        `GET ${prefix}/health`,
        `POST ${prefix}/subscriptions/orders/keys/a%2Fb/pause`,
        `GET ${prefix}/subscriptions/orders/keys`,
      ]);
    }
  });
});

import { describe, expect, it } from "vitest";
import { createHmac } from "node:crypto";
import { constantTimeEqual, sign, verify } from "../src/webhookSignature.js";
import { createApi } from "../src/http/api.js";
import { present } from "./helpers/present.js";
import { openCorq } from "../functions/database.js";

const now = 1_800_000_000;
const body = '{"subscription":"s"}';
/** Flips the bits `mask` of byte `index` of `bytes`, in place. */
const flip = (bytes: Uint8Array, index: number, mask: number) => {
  bytes[index] = present(bytes[index], `byte ${index} of ${bytes.length}`) ^ mask;
};

describe("Standard Webhooks signatures", () => {
  it("matches an independent HMAC (node:crypto) for plain and whsec_ secrets", async () => {
    const raw = Buffer.from("0123456789abcdef0123456789abcdef");
    const whsec = `whsec_${raw.toString("base64")}`;
    const expected = createHmac("sha256", raw).update(`msg_1.${now}.${body}`).digest("base64");
    expect(await sign(whsec, { id: "msg_1", timestamp: now, body })).toBe(`v1,${expected}`);
    const plain = createHmac("sha256", "dev-webhook-secret").update(`msg_1.${now}.${body}`).digest("base64");
    expect(await sign("dev-webhook-secret", { id: "msg_1", timestamp: now, body })).toBe(`v1,${plain}`);
  });

  it("accepts a good signature among several, and refuses tampered, stale and malformed ones", async () => {
    const signature = await sign("s3cret", { id: "m", timestamp: now, body });
    const headers = { id: "m", timestamp: String(now), signature: `v1,AAAA ${signature}` };
    const check = (h: typeof headers, b = body, secrets = ["s3cret"]) => verify(secrets, h, b, { nowSeconds: now });
    expect(await check(headers)).toEqual({ ok: true });
    expect(await check(headers, body + " ")).toEqual({ ok: false, reason: "bad_signature" });
    expect(await check({ ...headers, id: "other" })).toEqual({ ok: false, reason: "bad_signature" });
    expect(await check(headers, body, ["wrong"])).toEqual({ ok: false, reason: "bad_signature" });
    expect(await check(headers, body, ["old", "s3cret"])).toEqual({ ok: true }); // rotation
    expect(await check({ ...headers, signature: "v1,!!notbase64" })).toEqual({ ok: false, reason: "bad_signature" });
    expect(await check({ ...headers, signature: "" })).toEqual({ ok: false, reason: "missing_headers" });
    expect(await verify(["s3cret"], headers, body, { nowSeconds: now + 301 })).toEqual({
      ok: false,
      reason: "stale_timestamp",
    });
    expect(await verify(["s3cret"], headers, body, { nowSeconds: now - 301 })).toEqual({
      ok: false,
      reason: "stale_timestamp",
    });
  });

  it("compares every byte: a signature with only its last byte flipped, or cut short, is refused", async () => {
    const good = await sign("s3cret", { id: "m", timestamp: now, body });
    const bytes = Buffer.from(good.slice(3), "base64");
    expect(bytes).toHaveLength(32);
    const flipped = Buffer.from(bytes);
    flip(flipped, 31, 0x01);
    const variants = {
      "last byte flipped": `v1,${flipped.toString("base64")}`,
      "last byte missing": `v1,${bytes.subarray(0, 31).toString("base64")}`,
      "half of it": `v1,${bytes.subarray(0, 16).toString("base64")}`,
      "base64 text cut short": good.slice(0, -4),
      "one extra byte": `v1,${Buffer.concat([bytes, Buffer.from([0])]).toString("base64")}`,
    };
    const check = (signature: string) =>
      verify(["s3cret"], { id: "m", timestamp: String(now), signature }, body, { nowSeconds: now });
    expect(await check(good)).toEqual({ ok: true });
    for (const [label, signature] of Object.entries(variants)) {
      expect(await check(signature), label).toEqual({ ok: false, reason: "bad_signature" });
    }
  });

  it("constantTimeEqual: equal only for the same length and every byte", () => {
    const a = Uint8Array.from({ length: 32 }, (_, i) => i);
    expect(constantTimeEqual(a, Uint8Array.from(a))).toBe(true);
    const last = Uint8Array.from(a);
    flip(last, 31, 0x80);
    expect(constantTimeEqual(a, last)).toBe(false);
    expect(constantTimeEqual(a, a.subarray(0, 31))).toBe(false);
    expect(constantTimeEqual(a.subarray(0, 31), a)).toBe(false);
    expect(constantTimeEqual(a, new Uint8Array(0))).toBe(false);
  });

  it("the dead-letter webhook (POST /dead-letters/retry) refuses them with 401", async () => {
    const secret = `whsec_${Buffer.alloc(32, 9).toString("base64")}`;
    const webhookBody = JSON.stringify({ subscription: "s" });
    const timestamp = Math.floor(Date.now() / 1000);
    const good = await sign(secret, { id: "msg_1", timestamp, body: webhookBody });
    const bytes = Buffer.from(good.slice(3), "base64");
    flip(bytes, 31, 0x01);
    const post = (signature: string) =>
      createApi({ subscriptions: [], open: openCorq }).request(
        "/dead-letters/retry",
        {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "webhook-id": "msg_1",
            "webhook-timestamp": String(timestamp),
            "webhook-signature": signature,
          },
          body: webhookBody,
        },
        { CORQ_WEBHOOK_SECRET: secret }, // no DATABASE_URL: a request that passes the check gets 503
      );
    expect((await post(`v1,${bytes.toString("base64")}`)).status).toBe(401);
    expect((await post(`v1,${bytes.subarray(0, 31).toString("base64")}`)).status).toBe(401);
    expect((await post(good.slice(0, -4))).status).toBe(401);
    expect((await post(good)).status).toBe(503);
  });
});

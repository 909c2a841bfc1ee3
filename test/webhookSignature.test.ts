import { describe, expect, it } from "vitest";
import { createHmac } from "node:crypto";
import { sign, verify } from "../src/webhookSignature.js";

const now = 1_800_000_000;
const body = '{"subscription":"s"}';

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
    expect(await verify(["s3cret"], headers, body, { nowSeconds: now + 301 })).toEqual({ ok: false, reason: "stale_timestamp" });
    expect(await verify(["s3cret"], headers, body, { nowSeconds: now - 301 })).toEqual({ ok: false, reason: "stale_timestamp" });
  });
});

import { describe, expect, it } from "vitest";
import { useCorq } from "./helpers/corq.js";

const open = useCorq();

describe("webhook replay protection", () => {
  it("acts on a webhook id once for 10 minutes; a failed release does not use the id up", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await corq.advance();
    const release = (webhookId: string, subscription = "s") => corq.releaseDeadLetters({ subscription, webhookId });
    expect(await release("msg_1")).toEqual({ released: 0 });
    await expect(release("msg_1")).rejects.toMatchObject({ code: "conflict" });
    // the release fails (no such subscription): the id is not recorded, the sender's retry is not a replay
    await expect(release("msg_2", "nope")).rejects.toMatchObject({ code: "unknown_subscription" });
    expect((await raw.query("SELECT id FROM corq.webhook_ids ORDER BY id")).rows.map((r) => r.id)).toEqual(["msg_1"]);
    // 11 minutes later the id is forgotten (the signature's 5-minute window refuses it by then anyway)
    await raw.query("UPDATE corq.webhook_ids SET seen_at = now() - interval '11 minutes'");
    expect(await release("msg_3")).toEqual({ released: 0 });
    expect((await raw.query("SELECT id FROM corq.webhook_ids ORDER BY id")).rows.map((r) => r.id)).toEqual(["msg_3"]);
    expect(await release("msg_1")).toEqual({ released: 0 });
  });
});

// The library says "no database right now" with the error it documents, whatever the driver said.
import { expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { createCorq } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";

const open = useCorq();

it("a refused connection (53300, too many connections) is CorqError database_unavailable, not the driver's error", async () => {
  const { url, raw } = await open();
  const role = `corq_limited_${randomBytes(4).toString("hex")}`;
  await raw.query(`CREATE ROLE ${role} LOGIN PASSWORD 'limited' CONNECTION LIMIT 0`);
  const limited = new URL(url);
  limited.username = role;
  limited.password = "limited";
  const corq = createCorq({ databaseUrl: limited.toString() });
  try {
    const error = await corq.append("s", [{ name: "E", data: {} }]).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "CorqError", code: "database_unavailable", status: 503 });
    expect((error as Error).message).not.toMatch(/limited|role/); // no driver text in the message
    expect(((error as Error).cause as { code?: string }).code).toBe("53300");
  } finally {
    await corq.close();
    await raw.query(`DROP ROLE ${role}`);
  }
});

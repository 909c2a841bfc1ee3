// The example's derived stream names (example/streamNames.ts): valid for corq whatever the
// text they are made of, and one-to-one (fast-check, seeded).
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { streamName } from "../src/config.js";
import { derivedStream } from "../example/streamNames.js";

const valid = (name: string) => streamName.safeParse(name).success;

/** The text a readable name was made of (`=XX` is a byte), or null for the digest form: decodable means one-to-one. */
function decoded(name: string, prefix: string): string | null {
  if (!name.startsWith(`${prefix}-`)) return null;
  const rest = name.slice(prefix.length + 1);
  const bytes: number[] = [];
  for (let i = 0; i < rest.length; ) {
    if (rest[i] === "=") {
      bytes.push(Number.parseInt(rest.slice(i + 1, i + 3), 16));
      i += 3;
    } else bytes.push(rest.charCodeAt(i++));
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

describe("derivedStream", () => {
  it("keeps readable names readable and escapes the rest", async () => {
    expect(await derivedStream("welcome", "visitor-ada")).toBe("welcome-visitor-ada");
    expect(await derivedStream("room-full-1", "12")).toBe("room-full-1-12");
    expect(await derivedStream("room-full-1", "Room 4")).toBe("room-full-1-Room=204");
    expect(await derivedStream("room-full-1", "=20")).toBe("room-full-1-=3D20");
    expect(await derivedStream("room-full-2", "été")).toBe("room-full-2-=C3=A9t=C3=A9");
    expect(await derivedStream("welcome", "v".repeat(192))).toBe(`welcome-${"v".repeat(192)}`); // 200
    expect(await derivedStream("welcome", "v".repeat(193))).toMatch(/^welcome:[0-9a-f]{64}$/);
  });

  it("is a valid stream name for any text, and distinct for distinct texts (seeded)", async () => {
    // well-formed text, as keys and streams are: any graphemes, and runs of the characters escaping is about
    const specials = fc.constantFrom(" ", "=", "-", ":", ".", "%", "é", "🚪", "a", "Z", "0", "2", "C", "3", "\u00a0");
    const text = fc.oneof(
      fc.string({ unit: "grapheme", maxLength: 300 }),
      fc.string({ unit: specials, maxLength: 80 }),
    );
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(text, { minLength: 2, maxLength: 12 }), fc.nat(20), async (parts, n) => {
        const names = await Promise.all(parts.map((part) => derivedStream(`room-full-${n}`, part)));
        for (const [i, name] of names.entries()) {
          expect(valid(name), name).toBe(true);
          const back = decoded(name, `room-full-${n}`);
          if (back === null) expect(name).toMatch(new RegExp(`^room-full-${n}:[0-9a-f]{64}$`));
          else expect(back).toBe(parts[i]);
        }
        expect(new Set(names).size).toBe(parts.length);
      }),
      { seed: 20261202, numRuns: 300 },
    );
  });

  it("never gives the same name to two (n, room) pairs", async () => {
    const pairs = [
      [1, "2-x"],
      [12, "x"],
      [1, ""],
      [11, ""],
      [1, "1"],
    ] as const;
    const names = await Promise.all(pairs.map(([n, room]) => derivedStream(`room-full-${n}`, room)));
    expect(new Set(names).size).toBe(pairs.length);
  });

  it("refuses a prefix that would make invalid or ambiguous names", async () => {
    for (const prefix of ["", "-x", "a b", "a=b"]) await expect(derivedStream(prefix, "x"), prefix).rejects.toThrow();
  });
});

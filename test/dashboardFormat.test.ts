// How the dashboard writes JSON and times into its cells (src/http/dashboard/layout.tsx).
import { describe, expect, it } from "vitest";
import {
  ErrorText,
  JsonText,
  KeepTimes,
  about,
  errorText,
  jsonParts,
  preview,
  spacedJson,
  utc,
} from "../src/http/dashboard/layout.js";

describe("JSON in a cell", () => {
  it("has a space after every , and : between members (a place to wrap), none added inside strings", () => {
    const value = { roomId: "room-12", who: { name: "Ada, Countess: of Lovelace", tags: ["a", "b"] }, n: [1, 2.5] };
    const text = spacedJson(value);
    expect(text).toBe(
      '{"roomId": "room-12", "who": {"name": "Ada, Countess: of Lovelace", "tags": ["a", "b"]}, "n": [1, 2.5]}',
    );
    expect(JSON.parse(text)).toEqual(value);
    // escapes inside strings are kept as they are
    const tricky = { 'q"uo,te': 'back\\slash", "x": 1', u: "\u2028" };
    expect(JSON.parse(spacedJson(tricky))).toEqual(tricky);
    expect(spacedJson(undefined)).toBe("");
    expect(spacedJson("a,b")).toBe('"a,b"');
  });

  it("renders each member's part as one unit, the spaces between them the only places to wrap", () => {
    expect(jsonParts({ ids: ["order-0001", "order-0002"], n: 1 })).toEqual([
      '{"ids":',
      '["order-0001",',
      '"order-0002"],',
      '"n":',
      "1}",
    ]);
    const html = String(JsonText({ value: { ids: ["order-0001", "order-0002"] } }));
    expect(html).toBe(
      '<pre class="json"><span class="nb">{&quot;ids&quot;:</span> <span class="nb">[&quot;order-0001&quot;,</span> <span class="nb">&quot;order-0002&quot;]}</span></pre>',
    );
    expect(String(JsonText({ value: { a: "x".repeat(50) }, max: 20 }))).toContain(`${"x".repeat(10)}…</span></pre>`);
    expect(String(ErrorText({ text: 'HTTP 503: {"e":1}' }))).toBe(
      '<pre class="json">HTTP 503: <span class="nb">{&quot;e&quot;:</span> <span class="nb">1}</span></pre>',
    );
    expect(String(ErrorText({ text: "Error: boom" }))).toBe("<pre>Error: boom</pre>");
  });

  it("preview cuts long JSON with an ellipsis", () => {
    expect(preview({ a: "x".repeat(300) }, 20)).toBe('{"a": "xxxxxxxxxxxx…');
  });

  it("spaces the JSON in an error text after its prefix; other text stays as it is", () => {
    expect(errorText('HTTP 503: {"error":"down","retry":[1,2]}')).toBe('HTTP 503: {"error": "down", "retry": [1, 2]}');
    expect(errorText("Error: boom {not json")).toBe("Error: boom {not json");
    expect(errorText("x".repeat(700), 10)).toBe(`${"x".repeat(9)}…`);
  });
});

it("writes every time in UTC and says so", () => {
  expect(utc("2026-11-30T12:00:05.123Z")).toBe("2026-11-30 12:00:05 UTC");
  expect(utc("2026-11-30T12:00:05.123Z", true)).toBe("2026-11-30 12:00:05.123 UTC");
});

it("keeps the ISO times of a key's reason whole (one unit each)", () => {
  const html = String(KeepTimes({ text: "paused since 2026-11-30T20:35:17.664Z; 2 events wait" }));
  expect(html).toBe('paused since <span class="nb">2026-11-30T20:35:17.664Z</span>; 2 events wait');
});

describe("a count that may be an estimate", () => {
  it("is written with ≈ before it when it is one (stats past 10,000), as it is otherwise", () => {
    expect([about(12_500, true), about(12_500, false), about(0, false)]).toEqual(["≈ 12,500", "12,500", "0"]);
  });
});

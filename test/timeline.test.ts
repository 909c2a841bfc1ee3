// The batch timeline's time axis: one label per tick, none repeated, at any window.
import { expect, it } from "vitest";
import { Timeline } from "../functions/dashboard/charts.js";

it("labels every tick of the axis distinctly, for windows from seconds to an hour", () => {
  const to = Date.parse("2026-11-30T12:00:00Z");
  for (const spanMs of [8_000, 45_000, 150_000, 270_000, 600_000, 1_800_000, 3_600_000]) {
    const batch = {
      subscription: "s",
      key: "k",
      startedAt: new Date(to - spanMs).toISOString(),
      finishedAt: new Date(to).toISOString(),
      events: 1,
      outcome: "acked" as const,
    };
    const svg = String(Timeline({ batches: [batch], from: to - spanMs, to, maxKeys: 10 }));
    const labels = [...svg.matchAll(/<text[^>]*y="14"[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
    expect(labels.length, `span ${spanMs}`).toBeGreaterThan(2);
    expect(new Set(labels).size, `span ${spanMs}: ${labels.join(", ")}`).toBe(labels.length);
  }
});

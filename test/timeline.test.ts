// The batch timeline's time axis: one label per tick, none repeated, at any window.
import { expect, it } from "vitest";
import { Timeline } from "../src/http/dashboard/charts.js";

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

const at = (to: number, agoMs: number, key: string) => ({
  subscription: "s",
  key,
  startedAt: new Date(to - agoMs - 50).toISOString(),
  finishedAt: new Date(to - agoMs).toISOString(),
  events: 1,
  outcome: "acked" as const,
});
const rowLabels = (svg: string) =>
  [...svg.matchAll(/<text[^>]*text-anchor="end"[^>]*>s · ([^<]*)<\/text>/g)].map((m) => m[1]);
const axisLabels = (svg: string) => [...svg.matchAll(/<text[^>]*y="14"[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);

it("orders its rows naturally: v-2 before v-10", () => {
  const to = Date.parse("2026-11-30T12:00:00Z");
  const keys = ["v-10", "v-2", "v-1", "v-20", "v-3", "w-1"];
  const svg = String(
    Timeline({ batches: keys.map((k, i) => at(to, i * 1000, k)), from: to - 60_000, to, maxKeys: 10 }),
  );
  expect(rowLabels(svg)).toEqual(["v-1", "v-2", "v-3", "v-10", "v-20", "w-1"]);
});

it("draws the whole window it is given, even when the batches are all in its last minute", () => {
  const to = Date.parse("2026-11-30T12:00:00Z");
  const batches = [at(to, 1000, "a"), at(to, 95_000, "b")];
  const svg = String(Timeline({ batches, from: to - 15 * 60_000, to, maxKeys: 10 }));
  const labels = axisLabels(svg);
  expect(labels[0]).toBe("now");
  expect(labels.at(-1)).toBe("-15 min");
  // the newest batch sits at the right edge, not spread over the plot
  const x = Number(/<rect[^>]* x="([\d.]+)"/.exec(svg)?.[1]);
  expect(x).toBeGreaterThan(1000);
});

// The README points each claim to the test or benchmark that checks it: those pointers must
// lead somewhere, and the figures it quotes from bench/RESULTS.md must be the ones there.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { present } from "./helpers/present.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const readme = readFileSync(join(root, "README.md"), "utf8");
const results = readFileSync(join(root, "bench/RESULTS.md"), "utf8");

describe("README", () => {
  it("names only files that exist", () => {
    const paths = new Set(
      [...readme.matchAll(/`((?:test|bench|example|src|functions|infra|docs)\/[\w./-]+\.(?:ts|tsx|md))`/g)].map(
        ([, path]) => present(path, "a quoted path"),
      ),
    );
    expect(paths.size).toBeGreaterThan(20);
    expect([...paths].filter((path) => !existsSync(join(root, path)))).toEqual([]);
  });

  it("quotes the benchmark table's rates and workloads from bench/RESULTS.md", () => {
    const [, fromEndToEnd] = results.split(/^## End to end/m);
    const [endToEnd = ""] = present(fromEndToEnd, '"## End to end" in bench/RESULTS.md').split(/^## /m);
    const [, fromBenchmarks] = readme.split(/^## Benchmarks$/m);
    const table = present(
      present(fromBenchmarks, '"## Benchmarks" in README.md')
        .split(/\n\n/)
        .find((block) => block.startsWith("| system")),
      "the README's benchmark table",
    );
    const rows = table
      .split("\n")
      .slice(2)
      .map((line) => line.split("|").map((cell) => cell.trim()));
    expect(rows.length).toBe(4);
    for (const [, system, workload, rate] of rows) {
      const quoted = present(rate?.match(/^[\d,]+/)?.[0], `${system}'s rate`);
      expect(endToEnd, `${system}: ${quoted} events/s`).toMatch(new RegExp(`\\b${quoted}\\b`));
      const jobs = present(workload?.match(/^[\d,]+/)?.[0], `${system}'s workload`);
      expect(endToEnd, `${system}: ${jobs} events`).toContain(jobs);
    }
    // the latency quoted in "Try it"
    expect(readme.replace(/\s+/g, " ")).toContain("took 80 ms at the median");
    expect(results).toContain("append-to-handler latency at 2 appends/s: p50 80 ms");
  });
});

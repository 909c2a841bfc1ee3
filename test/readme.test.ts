// The README points each claim to the test or benchmark that checks it: those pointers must
// lead somewhere, and the figures it quotes from bench/RESULTS.md must be the ones there.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const readme = readFileSync(join(root, "README.md"), "utf8");
const results = readFileSync(join(root, "bench/RESULTS.md"), "utf8");

describe("README", () => {
  it("names only files that exist", () => {
    const paths = new Set(
      [...readme.matchAll(/`((?:test|bench|example|src|functions|infra|docs)\/[\w./-]+\.(?:ts|tsx|md))`/g)].map(
        ([, path]) => path,
      ),
    );
    expect(paths.size).toBeGreaterThan(20);
    expect([...paths].filter((path) => !existsSync(join(root, path)))).toEqual([]);
  });

  it("quotes the benchmark table's rates and workloads from bench/RESULTS.md", () => {
    const endToEnd = results.split(/^## End to end/m)[1].split(/^## /m)[0];
    const table = readme
      .split(/^## Benchmarks$/m)[1]
      .split(/\n\n/)
      .find((block) => block.startsWith("| system"))!;
    const rows = table
      .split("\n")
      .slice(2)
      .map((line) => line.split("|").map((cell) => cell.trim()));
    expect(rows.length).toBe(4);
    for (const [, system, workload, rate] of rows) {
      const quoted = rate.match(/^[\d,]+/)![0];
      expect(endToEnd, `${system}: ${quoted} events/s`).toMatch(new RegExp(`\\b${quoted}\\b`));
      const jobs = workload.match(/^[\d,]+/)![0];
      expect(endToEnd, `${system}: ${jobs} events`).toContain(jobs);
    }
    // the latency quoted in "Try it"
    expect(readme.replace(/\s+/g, " ")).toContain("took 80 ms at the median");
    expect(results).toContain("append-to-handler latency at 2 appends/s: p50 80 ms");
  });
});

// The README starts with the user and stays short; the rest lives in docs/. Every file either
// names must exist, every relative link must lead to a file (and heading) that is there, and
// the figures they quote must be the ones bench/RESULTS.md holds, in the section they name.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { present } from "./helpers/present.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const read = (path: string) => readFileSync(join(root, path), "utf8");
const readme = read("README.md");
const results = read("bench/RESULTS.md");
const documents = [
  "README.md",
  ...readdirSync(join(root, "docs")).flatMap((f) => (f.endsWith(".md") ? [`docs/${f}`] : [])),
];

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces → hyphens. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
const headings = (text: string) =>
  new Set(
    [...text.replace(/```[\s\S]*?```/g, "").matchAll(/^#{1,6} (.+)$/gm)].map(([, h]) =>
      anchor(present(h, "a heading")),
    ),
  );

/** The text of RESULTS.md's first section whose heading starts with `title`. */
function section(title: string): string {
  const [, after] = results.split(new RegExp(`^## ${title.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}.*$`, "m"));
  return present(present(after, `a "## ${title}" section in bench/RESULTS.md`).split(/^## /m)[0], title);
}

/** The rows of the first markdown table after `heading` in `text`, as trimmed cells. */
function table(text: string, heading: RegExp): string[][] {
  const [, after] = text.split(heading);
  const block = present(
    present(after, `${heading}`)
      .split(/\n\n/)
      .find((b) => b.startsWith("|")),
    `a table after ${heading}`,
  );
  return block
    .split("\n")
    .slice(2)
    .map((line) =>
      line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
}

describe("README and docs/", () => {
  it("the README stays a page a user reads first (at most 250 lines)", () => {
    expect(readme.split("\n").length).toBeLessThanOrEqual(250);
  });

  it("name only files that exist", () => {
    const missing: string[] = [];
    let quoted = 0;
    for (const doc of documents) {
      for (const [, path] of read(doc).matchAll(
        /`((?:test|bench|example|src|functions|infra|docs|cli)\/[\w./-]+\.(?:ts|tsx|md|json))`/g,
      )) {
        quoted++;
        if (!existsSync(join(root, present(path, "a quoted path")))) missing.push(`${doc}: ${path}`);
      }
    }
    expect(quoted).toBeGreaterThan(100);
    expect(missing).toEqual([]);
  });

  it("link only to files and headings that exist", () => {
    const broken: string[] = [];
    let links = 0;
    for (const doc of documents) {
      const text = read(doc).replace(/```[\s\S]*?```/g, "");
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (!target || /^[a-z]+:/.test(target)) continue; // https:, mailto:
        links++;
        const [file = "", hash] = target.split("#");
        const path = file === "" ? doc : normalize(join(dirname(doc), file));
        if (!existsSync(join(root, path))) broken.push(`${doc}: ${target}`);
        else if (hash && path.endsWith(".md") && !headings(read(path)).has(hash))
          broken.push(`${doc}: ${target} (no heading)`);
      }
    }
    expect(links).toBeGreaterThan(40);
    expect(broken).toEqual([]);
  });

  it("the README's figures are in the bench/RESULTS.md section each row names", () => {
    const rows = table(readme, /^## Numbers$/m);
    expect(rows.length).toBeGreaterThan(1);
    for (const [what, figure = "", run = ""] of rows) {
      const named = present(/^"([^"]+)"/.exec(run)?.[1], `${what}: the RESULTS.md section it names`);
      const text = section(named);
      const numbers = [...figure.matchAll(/\d[\d,]*(?:\.\d+)?/g)].map(([n]) => n).filter((n) => n.length >= 3);
      expect(numbers.length, what).toBeGreaterThan(0);
      for (const n of numbers)
        expect(text, `${what}: ${n} in "${named}"`).toMatch(new RegExp(`(^|[^\\d,])${n}([^\\d,]|$)`));
      // the run's date: in the section's heading, or the full run's (the file's first line) for its sections
      const date = present(/\d{4}-\d{2}-\d{2}/.exec(run)?.[0], `${what}: the run's date`);
      const heading = present(
        results.split("\n").find((line) => line.startsWith(`## ${named}`)),
        named,
      );
      expect(/\d{4}-\d{2}-\d{2}/.test(heading) ? heading : results.split("\n")[0], what).toContain(date);
    }
  });

  it("docs/benchmarks.md quotes the end-to-end table's rates and workloads from bench/RESULTS.md", () => {
    const endToEnd = section("End to end");
    const rows = table(read("docs/benchmarks.md"), /^# Benchmarks$/m);
    expect(rows.length).toBe(6); // corq and the five peer rows
    for (const [system, workload, rate] of rows) {
      const quoted = present(rate?.match(/^[\d,]+/)?.[0], `${system}'s rate`);
      expect(endToEnd, `${system}: ${quoted} events/s`).toMatch(new RegExp(`\\b${quoted}\\b`));
      const jobs = present(workload?.match(/^[\d,]+/)?.[0], `${system}'s workload`);
      expect(endToEnd, `${system}: ${jobs} events`).toContain(jobs);
    }
    // the latency quoted in the tour
    const median = present(
      /took (\d+) ms at the median/.exec(read("docs/tour.md").replace(/\s+/g, " "))?.[1],
      "the tour's append-to-handler median",
    );
    expect(results).toContain(`append-to-handler latency at 2 appends/s: p50 ${median} ms`);
  });

  it("docs quote a retention pass's p99s, at serve's defaults and at 25 chunks a pass, from bench/RESULTS.md", () => {
    const runs = [
      "A retention pass removing 10,000,000 events beside 100 live appends/s — 2026-12-03, `npm run bench -- --only retentionPass` on 60295cb",
      "A retention pass removing 10,000,000 events beside 100 live appends/s, 25 chunks per pass",
    ];
    const quoting = ["docs/operations.md", "docs/benchmarks.md"].map((path) => read(path).replace(/\s+/g, " "));
    for (const run of runs) {
      const text = section(run);
      const row = (phase: string) =>
        present(
          text
            .split("\n")
            .find((line) => line.startsWith(`| ${phase}`))
            ?.split("|")
            .map((cell) => cell.trim()),
          `the "${phase}" row of "${run}"`,
        );
      // cells: "", phase, append p50, append p99, append→handler p50, append→handler p99, …
      const [idle, pass] = [row("idle, before"), row("the pass")];
      const quoted = `appends ${idle[3]} → ${pass[3]} ms, append→handler ${idle[5]} → ${pass[5]} ms`;
      for (const doc of quoting) expect(doc, run).toContain(quoted);
    }
  });
});

// Global setup for the reliability scenarios: each scenario appends its figures to one file
// (test files run in separate workers); after the run the totals are printed as one line:
//   chaos: scenarios=<n> events=<n> lost=0 order=0 double_claims=0 dup=<n>
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import type { ScenarioFigures } from "../helpers/chaos.js";

declare module "vitest" {
  export interface ProvidedContext {
    chaosFile: string;
  }
}

let dir: string | undefined;

export function setup(project: TestProject) {
  dir = mkdtempSync(join(tmpdir(), "corq-chaos-"));
  project.provide("chaosFile", join(dir, "scenarios.jsonl"));
}

export function teardown() {
  if (!dir) return;
  const file = join(dir, "scenarios.jsonl");
  if (existsSync(file)) {
    const scenarios: ScenarioFigures[] = readFileSync(file, "utf8").trim().split("\n").map((line) => JSON.parse(line));
    const sum = (field: "events" | "lost" | "order" | "doubleClaims" | "dup") => scenarios.reduce((total, s) => total + s[field], 0);
    console.log(
      `\nchaos: scenarios=${new Set(scenarios.map((s) => s.scenario)).size} events=${sum("events")} lost=${sum("lost")} ` +
        `order=${sum("order")} double_claims=${sum("doubleClaims")} dup=${sum("dup")}`,
    );
  }
  rmSync(dir, { recursive: true, force: true });
}

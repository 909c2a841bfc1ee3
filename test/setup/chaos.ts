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

// Both test projects (vitest.config.ts) run this setup in the one main process: they share
// one file, and the last teardown prints the line.
const shared = globalThis as { corqChaos?: { dir: string; users: number } };

export function setup(project: TestProject) {
  shared.corqChaos ??= { dir: mkdtempSync(join(tmpdir(), "corq-chaos-")), users: 0 };
  shared.corqChaos.users++;
  project.provide("chaosFile", join(shared.corqChaos.dir, "scenarios.jsonl"));
}

export function teardown() {
  const state = shared.corqChaos;
  if (!state || --state.users > 0) return;
  shared.corqChaos = undefined;
  const file = join(state.dir, "scenarios.jsonl");
  if (existsSync(file)) {
    const scenarios: ScenarioFigures[] = readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    const sum = (field: "events" | "lost" | "order" | "doubleClaims" | "dup") =>
      scenarios.reduce((total, s) => total + s[field], 0);
    console.log(
      `\nchaos: scenarios=${new Set(scenarios.map((s) => s.scenario)).size} events=${sum("events")} lost=${sum("lost")} ` +
        `order=${sum("order")} double_claims=${sum("doubleClaims")} dup=${sum("dup")}`,
    );
  }
  rmSync(state.dir, { recursive: true, force: true });
}

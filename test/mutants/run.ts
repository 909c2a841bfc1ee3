// The mutation check: `npm run test:mutants [-- --only <name-substring> …] [--no-baseline] [--dry-run]`.
// Applies each mutant of mutants.ts, one at a time, to a scratch copy of the repository and
// runs only the test files listed for it: killed = a test failed, survived = all passed,
// stale = its search text is no longer in the code (rewrite it; never drop it silently).
//
//   copy     the tracked and untracked-unignored files into a temp dir, node_modules linked;
//   server   one embedded Postgres for every run (DATABASE_URL for the test setup);
//   baseline the listed test files pass on the unmutated copy (else a kill means nothing);
//   mutants  edit → vitest (bail at the first failure) → restore; a run still going after
//            RUN_LIMIT_MS is stopped and counted killed (hung), as a test timeout is;
//   summary  one line: mutants: killed=<n> survived=<n> stale=<n> — and the survivors' names.
// Exit code: 0 all killed (with --dry-run: none stale), 1 a survivor or a stale mutant, 2 the
// check itself failed (a red baseline, a bad argument).
import { spawn, execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startEmbeddedPostgres } from "../../cli/dev/embeddedPostgres.js";
import { mutants, type Edit, type Mutant } from "./mutants.js";

const RUN_LIMIT_MS = 240_000;
const BASELINE_MS_PER_FILE = 60_000;
const TEST_TIMEOUT_MS = 30_000; // vitest.config.ts testTimeout
const root = join(dirname(fileURLToPath(import.meta.url)), "../..");

interface Outcome {
  mutant: Mutant;
  status: "killed" | "survived" | "stale";
  note: string;
  ms: number;
}

function parseArgs(argv: string[]): { only: string[]; baseline: boolean; dryRun: boolean } {
  const only: string[] = [];
  let baseline = true;
  let dryRun = false;
  for (let i = 0; i < argv.length; i++) {
    const [arg, next] = [argv[i], argv[i + 1]];
    if (arg === "--only" && next) {
      only.push(next.toLowerCase());
      i++;
    } else if (arg === "--no-baseline") baseline = false;
    else if (arg === "--dry-run") dryRun = true;
    else throw new Error(`unknown argument ${arg} (use --only <name-substring>, --no-baseline, --dry-run)`);
  }
  return { only, baseline, dryRun };
}

/**
 * The mutated text of each edited file, or why the mutant is stale. Read under `base`: in a run,
 * the scratch copy — others may be editing the work tree meanwhile, and a file read from it
 * mid-run (a mutant's base, a restore) mixed their half-done edits into the copy the baseline
 * passed on (seen: three mutants "killed" by another engineer's work in progress).
 */
function mutate(mutant: Mutant, base = root): { files: Map<string, string> } | { stale: string } {
  // a test file that is gone would make vitest fail with "No test files found": a kill that means nothing
  const missing = mutant.tests.find((test) => !existsSync(join(base, test)));
  if (missing !== undefined) return { stale: `its test file ${missing} does not exist` };
  if (mutant.tests.length === 0) return { stale: "it names no test file" };
  const files = new Map<string, string>();
  for (const edit of mutant.edits) {
    const text = files.get(edit.file) ?? readFileSync(join(base, edit.file), "utf8");
    const count = text.split(edit.search).length - 1;
    if (count === 0) return { stale: `search text not found in ${edit.file}: ${preview(edit)}` };
    if (count > 1 && !edit.all) return { stale: `search text occurs ${count} times in ${edit.file}: ${preview(edit)}` };
    files.set(
      edit.file,
      edit.all ? text.split(edit.search).join(edit.replace) : text.replace(edit.search, () => edit.replace),
    );
  }
  return { files };
}

const preview = (edit: Edit) => JSON.stringify(edit.search.length > 60 ? `${edit.search.slice(0, 60)}…` : edit.search);

function scratchCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), "corq-mutants-"));
  const listed = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], {
    cwd: root,
    encoding: "utf8",
  });
  for (const file of listed.split("\0")) {
    if (!file || file === "node_modules" || file.startsWith("node_modules/")) continue;
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    try {
      cpSync(join(root, file), join(dir, file));
    } catch {
      // listed but deleted in the work tree
    }
  }
  symlinkSync(realpathSync(join(root, "node_modules")), join(dir, "node_modules"));
  return dir;
}

interface VitestReport {
  numFailedTests: number;
  testResults: {
    name: string;
    status: string;
    message: string;
    assertionResults: { fullName: string; status: string; failureMessages: string[]; duration?: number }[];
  }[];
}

/** Runs vitest on `tests` in `dir`; resolves with whether it failed and a short description. */
function runTests(
  dir: string,
  tests: string[],
  env: NodeJS.ProcessEnv,
  bail: boolean,
  limitMs = RUN_LIMIT_MS,
): Promise<{ failed: boolean; note: string }> {
  const report = join(dir, ".mutant-report.json");
  rmSync(report, { force: true });
  // one file at a time: the xmin horizon is the whole cluster's, so a file that holds a
  // transaction open (on purpose) stalls the advances of a file running beside it
  const args = [
    "run",
    ...tests,
    "--reporter=json",
    `--outputFile=${report}`,
    "--maxWorkers=1",
    ...(bail ? ["--bail=1"] : []),
  ];
  return new Promise((resolve) => {
    const child = spawn(join(dir, "node_modules/.bin/vitest"), args, {
      cwd: dir,
      env,
      detached: true,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL"); // its own process group: vitest and its workers
      } catch {
        // already gone
      }
    }, limitMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (signal) return resolve({ failed: true, note: `hung: stopped after ${limitMs / 1000} s` });
      resolve(describe(report, code ?? 1, stderr));
    });
  });
}

function describe(reportFile: string, code: number, stderr: string): { failed: boolean; note: string } {
  let report: VitestReport;
  try {
    report = JSON.parse(readFileSync(reportFile, "utf8"));
  } catch {
    return {
      failed: code !== 0,
      note: code !== 0 ? `vitest exited ${code}: ${stderr.trim().split("\n").slice(-3).join(" | ")}` : "",
    };
  }
  const failures = report.testResults.flatMap((file) => {
    const tests = file.assertionResults
      .filter((t) => t.status === "failed")
      .map((t) => ({
        where: `${short(file.name)} > ${t.fullName}`,
        message: t.failureMessages.join(" "),
        // vitest's JSON report words a test timeout as STACK_TRACE_ERROR: go by the duration too
        timedOut:
          t.failureMessages.some((m) => /timed out in \d+ms/i.test(m)) || (t.duration ?? 0) >= TEST_TIMEOUT_MS - 100,
      }));
    return tests.length > 0 || file.status !== "failed"
      ? tests
      : [{ where: short(file.name), message: file.message, timedOut: /timed out/i.test(file.message) }];
  });
  const [first] = failures;
  if (first === undefined) return { failed: code !== 0, note: code !== 0 ? `vitest exited ${code}` : "" };
  const timedOut = failures.every((f) => f.timedOut);
  const [firstLine = ""] = first.message.split("\n"); // split gives one part at least
  const message = firstLine.slice(0, 160);
  return {
    failed: true,
    note: `${timedOut ? "BY TIMEOUT only: " : ""}${first.where}: ${message}${failures.length > 1 ? ` (+${failures.length - 1} more)` : ""}`,
  };
}

const short = (file: string) => file.slice(file.indexOf("test/"));
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

async function main() {
  const { only, baseline, dryRun } = parseArgs(process.argv.slice(2));
  const selected =
    only.length === 0 ? mutants : mutants.filter((m) => only.some((o) => m.name.toLowerCase().includes(o)));
  if (selected.length === 0) throw new Error(`no mutant matches ${only.join(", ")}`);
  if (dryRun) {
    // only whether each search text is still in the code and each test file there: nothing is
    // run, a second or two — CI runs this before the suite (.ci/run), so a mutant cannot drift
    let stale = 0;
    for (const mutant of selected) {
      const mutated = mutate(mutant);
      if ("stale" in mutated) stale++;
      console.log(`${"stale" in mutated ? `stale    ${mutant.name} — ${mutated.stale}` : `ok       ${mutant.name}`}`);
    }
    console.log(`mutants (dry run): ${selected.length - stale} apply, stale=${stale}`);
    process.exitCode = stale > 0 ? 1 : 0;
    return;
  }
  const started = Date.now();
  const dir = scratchCopy();
  // the server the test setup would start per run, started once (DATABASE_URL)
  const postgres = await startEmbeddedPostgres({
    settings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off" },
  });
  const env = { ...process.env, DATABASE_URL: postgres.url, FORCE_COLOR: "0" };
  const outcomes: Outcome[] = [];
  try {
    const runnable = selected.filter((m) => !("stale" in mutate(m, dir)));
    const files = [...new Set(runnable.flatMap((m) => m.tests))].sort();
    if (baseline && files.length > 0) {
      console.log(`baseline: ${files.length} test files on the unmutated copy …`);
      const t0 = Date.now();
      // every listed file at once: a mutant's limit is for its few files (48 files took over 240 s here)
      const base = await runTests(dir, files, env, false, files.length * BASELINE_MS_PER_FILE);
      if (base.failed) throw new Error(`the unmutated code fails its tests; fix that first (${base.note})`);
      console.log(`baseline: green in ${seconds(Date.now() - t0)}`);
    }
    for (const [index, mutant] of selected.entries()) {
      const t0 = Date.now();
      const mutated = mutate(mutant, dir);
      let outcome: Outcome;
      if ("stale" in mutated) {
        outcome = { mutant, status: "stale", note: mutated.stale, ms: 0 };
      } else {
        const originals = new Map([...mutated.files.keys()].map((file) => [file, readFileSync(join(dir, file))]));
        for (const [file, text] of mutated.files) writeFileSync(join(dir, file), text);
        try {
          const run = await runTests(dir, mutant.tests, env, true);
          outcome = {
            mutant,
            status: run.failed ? "killed" : "survived",
            note: run.failed ? run.note : `passed: ${mutant.tests.join(" ")}`,
            ms: Date.now() - t0,
          };
        } finally {
          for (const [file, text] of originals) writeFileSync(join(dir, file), text);
        }
      }
      outcomes.push(outcome);
      console.log(
        `[${index + 1}/${selected.length}] ${outcome.status.padEnd(8)} ${mutant.name} — ${outcome.note}${outcome.ms ? ` (${seconds(outcome.ms)})` : ""}`,
      );
    }
  } finally {
    await postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const named = (status: Outcome["status"]) => outcomes.filter((o) => o.status === status).map((o) => o.mutant.name);
  const [killed, survived, stale] = [named("killed"), named("survived"), named("stale")];
  const byTimeout = outcomes.filter((o) => o.status === "killed" && /^(BY TIMEOUT|hung)/.test(o.note)).length;
  console.log(`\nmutation check: ${seconds(Date.now() - started)}; killed only by a timeout: ${byTimeout}`);
  console.log(
    `mutants: killed=${killed.length} survived=${survived.length} stale=${stale.length}` +
      (survived.length ? ` — survived: ${survived.join("; ")}` : "") +
      (stale.length ? ` — stale: ${stale.join("; ")}` : ""),
  );
  process.exitCode = survived.length + stale.length > 0 ? 1 : 0;
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 2;
});

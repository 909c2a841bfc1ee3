// A process and what it started, as Linux shows them in /proc: what `npm start` and `corq dev`
// leave behind (test/npmStart.int.test.ts, test/dev.int.test.ts). Linux only.
import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/** A spawned process (stdout and stderr piped) with everything it printed so far, and its exit code. */
export function watched(child: ChildProcess): {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
} {
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** /proc/<pid>/stat: name and state (Z = a zombie: ended, not yet reaped) and parent. */
export function stat(pid: number): { comm: string; state: string; ppid: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const [state, ppid] = text.slice(text.lastIndexOf(")") + 2).split(" ");
    if (state === undefined) return undefined;
    return { comm: text.slice(text.indexOf("(") + 1, text.lastIndexOf(")")), state, ppid: Number(ppid) };
  } catch {
    return undefined;
  }
}

export const alive = (pid: number) => (stat(pid)?.state ?? "Z") !== "Z";

/** Every process below `pid`: its children, theirs, … */
export function descendants(pid: number): { pid: number; comm: string }[] {
  const all = readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
  const children = new Map<number, number[]>();
  for (const p of all) {
    const s = stat(p);
    if (s) children.set(s.ppid, [...(children.get(s.ppid) ?? []), p]);
  }
  const found: { pid: number; comm: string }[] = [];
  for (let queue = [...(children.get(pid) ?? [])]; queue.length > 0; ) {
    const p = queue.shift()!;
    const s = stat(p);
    if (s) found.push({ pid: p, comm: s.comm });
    queue.push(...(children.get(p) ?? []));
  }
  return found;
}

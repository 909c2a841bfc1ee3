// CPU time of local processes from /proc (Linux): what the cost section (bench/cost.ts) reads
// for workerd (the Worker's runtime under wrangler dev) and for a Postgres cluster, since
// neither reports its own. utime + stime of a process; cutime + cstime add its children that
// ended (a Postgres backend that exits is reaped by the postmaster, and its time moves there).
import { readdirSync, readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";

const ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

interface Stat {
  pid: number;
  ppid: number;
  comm: string;
  /** own CPU ms (utime + stime) */
  ownMs: number;
  /** CPU ms of its ended, reaped children (cutime + cstime) */
  reapedMs: number;
}

function stat(pid: number): Stat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined; // ended meanwhile
  }
  // "pid (comm) state ppid …": comm may hold spaces and parentheses; the fields follow the last ")"
  const close = text.lastIndexOf(")");
  const comm = text.slice(text.indexOf("(") + 1, close);
  const fields = text.slice(close + 2).split(" ");
  const tick = (i: number) => Number(fields[i] ?? 0);
  return {
    pid,
    ppid: tick(1),
    comm,
    ownMs: ((tick(11) + tick(12)) * 1000) / ticksPerSecond,
    reapedMs: ((tick(13) + tick(14)) * 1000) / ticksPerSecond,
  };
}

function allProcesses(): Stat[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .flatMap((name) => stat(Number(name)) ?? []);
}

/** `root` and every process below it. */
function tree(root: number): Stat[] {
  const processes = allProcesses();
  const found: Stat[] = [];
  const wanted = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of processes) {
      if ((wanted.has(p.ppid) || p.pid === root) && !found.includes(p)) {
        found.push(p);
        wanted.add(p.pid);
        grew = true;
      }
    }
  }
  return found;
}

/** CPU ms of the processes below this one whose name contains `name` (and their ended children). */
export function descendantsCpuMs(name: string): number {
  return tree(process.pid)
    .filter((p) => p.pid !== process.pid && p.comm.includes(name))
    .reduce((sum, p) => sum + p.ownMs + p.reapedMs, 0);
}

/** CPU ms of a whole process tree: the root, every live process below it, and those that ended. */
export function treeCpuMs(root: number): number {
  return tree(root).reduce((sum, p) => sum + p.ownMs + p.reapedMs, 0);
}

/** CPU ms one process used itself. */
export function ownCpuMs(pid: number): number {
  return stat(pid)?.ownMs ?? 0;
}

/** The parent of a process (a Postgres backend's: the postmaster). */
export function parentOf(pid: number): number {
  const found = stat(pid);
  if (!found) throw new Error(`no process ${pid}`);
  return found.ppid;
}

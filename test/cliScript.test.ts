// The CLI in a clone of this repository, where `dist/` is not built: `npm run corq -- …` runs it
// from source (the package's bin, `npx corq`, is tested from the packed tarball in package.int).
import { execFile } from "node:child_process";
import { describe, expect, it } from "vitest";

function npmRunCorq(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile("npm", ["run", "--silent", "corq", "--", ...args], (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("npm run corq", () => {
  it("prints the usage with --help, and refuses a URL without its scheme with exit 2", async () => {
    const help = await npmRunCorq(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/usage: corq <command>/);
    const refused = await npmRunCorq(["stats", "--url", "localhost:8787"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--url must be an http:\/\/ or https:\/\/ URL/);
  });
});

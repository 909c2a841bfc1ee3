// The commit a bench run measures, as its figures name it.
import { execSync } from "node:child_process";

/** The commit the run is on, and whether tracked files of src/ or bench/ differ from it. */
export function commit(): string {
  try {
    const hash = execSync("git rev-parse --short HEAD", { encoding: "utf8" }).trim();
    const dirty =
      execSync("git status --porcelain --untracked-files=no -- src bench", { encoding: "utf8" }).trim() !== "";
    return dirty ? `${hash} with uncommitted changes` : hash;
  } catch {
    return "an unknown commit";
  }
}

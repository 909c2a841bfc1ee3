// `npm run size`: what the package weighs in a user's bundle — the installed tarball
// (infra/packInstall.ts) bundled by esbuild (the bundler wrangler uses) as a Worker would be:
// raw, minified, and minified + gzip. The table in docs/deploy.md comes from here.
import { build } from "esbuild";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { packAndInstall } from "./packInstall.js";

const entries: Record<string, string> = {
  "corqueue/worker — a Worker with one subscription (createWorker)": `import { createWorker } from "corqueue/worker";
export default createWorker({ subscriptions: [{ name: "s", handle: async () => {} }] });`,
  "corqueue — the library (createCorq)": `export { createCorq } from "corqueue";`,
  "corqueue/client — the HTTP client": `export { createClient } from "corqueue/client";`,
};

async function size(dir: string, file: string, minify: boolean): Promise<Uint8Array> {
  const result = await build({
    entryPoints: [join(dir, file)],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    conditions: ["workerd", "worker", "browser"],
    // what wrangler leaves to the runtime (nodejs_compat)
    external: ["node:*", "cloudflare:*"],
    minify,
    logLevel: "error",
  });
  return result.outputFiles[0]?.contents ?? new Uint8Array();
}

const { dir } = packAndInstall();
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
const lines = [
  "| bundle (esbuild, as wrangler builds it) | raw | minified | minified + gzip |",
  "| --- | --- | --- | --- |",
];
try {
  for (const [name, source] of Object.entries(entries)) {
    const file = `${lines.length}.ts`;
    writeFileSync(join(dir, file), source);
    const raw = await size(dir, file, false);
    const minified = await size(dir, file, true);
    lines.push(`| ${name} | ${kib(raw.length)} | ${kib(minified.length)} | ${kib(gzipSync(minified).length)} |`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(lines.join("\n"));

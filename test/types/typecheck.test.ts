// The type-level tests (test/types/*.test-d.ts) checked in the suite too, not only by `npm run
// typecheck`: the TypeScript compiler over each file with the repository's strict settings. A
// type assertion that does not hold, or a `@ts-expect-error` that meets no error, fails here.
// docs/typed-events.md's examples too: its ```ts blocks as one module, importing the sources.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");
const files = readdirSync(join(root, "test/types"))
  .filter((name) => name.endsWith(".test-d.ts"))
  .map((name) => join(root, "test/types", name));

const docs = join(root, "test/types/docs-typed-events.ts");

/** docs/typed-events.md's ```ts blocks as one module, importing the sources instead of the package. */
function docsModule(): string {
  const markdown = readFileSync(join(root, "docs/typed-events.md"), "utf8");
  const blocks = [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] ?? "");
  if (blocks.length < 2) throw new Error("docs/typed-events.md: its examples are gone");
  const code = blocks
    .join("\n")
    .replaceAll('from "corqueue"', 'from "../../src/index.js"')
    .replaceAll('from "corqueue/worker"', 'from "../../functions/createWorker.js"');
  return `${code}\nexport {};\n`;
}

/** One program over every file (the docs' module virtual): its errors, "path:line: message", by file. */
function typeErrors(): Map<string, string[]> {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, "tsconfig.strict.json"),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
      },
    },
  );
  if (!config) throw new Error("tsconfig.strict.json could not be read");
  const options = { ...config.options, noEmit: true };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists } = host;
  host.fileExists = (name) => name === docs || fileExists(name);
  host.getSourceFile = (name, ...rest) =>
    name === docs
      ? ts.createSourceFile(name, docsModule(), ts.ScriptTarget.ES2022, true)
      : getSourceFile(name, ...rest);
  const program = ts.createProgram([...files, docs], options, host);
  const errors = new Map<string, string[]>([...files, docs].map((file) => [file, []]));
  for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
    const file = diagnostic.file?.fileName ?? "";
    const line =
      diagnostic.file && diagnostic.start !== undefined
        ? diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line + 1
        : 0;
    // an error in a file both import (src/) is listed with each
    const owners = errors.has(file) ? [file] : [...errors.keys()];
    for (const owner of owners) errors.get(owner)?.push(`${file.slice(root.length + 1)}:${line}: ${message}`);
  }
  return errors;
}

describe("the type-level tests", () => {
  let errors: Map<string, string[]> | undefined;
  const errorsOf = (file: string) => {
    errors ??= typeErrors();
    return errors.get(file);
  };

  it.each(files.map((file) => [file.slice(root.length + 1), file]))(
    "%s type-checks",
    (_, file) => {
      expect(errorsOf(file)).toEqual([]);
    },
    180_000,
  );

  it("docs/typed-events.md's examples type-check against the sources", () => {
    expect(errorsOf(docs)).toEqual([]);
  }, 180_000);
});

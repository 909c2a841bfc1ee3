// The type-level tests (test/types/*.test-d.ts) checked in the suite too, not only by `npm run
// typecheck`: the TypeScript compiler over each file with the repository's strict settings. A
// type assertion that does not hold, or a `@ts-expect-error` that meets no error, fails here.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");
const files = readdirSync(join(root, "test/types"))
  .filter((name) => name.endsWith(".test-d.ts"))
  .map((name) => join(root, "test/types", name));

describe("the type-level tests", () => {
  it.each(files.map((file) => [file.slice(root.length + 1), file]))(
    "%s type-checks",
    (_, file) => {
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
      const program = ts.createProgram([file], { ...config.options, noEmit: true });
      const problems = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
        const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
        if (!diagnostic.file || diagnostic.start === undefined) return message;
        const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
        return `${diagnostic.file.fileName.slice(root.length + 1)}:${line + 1}: ${message}`;
      });
      expect(problems).toEqual([]);
    },
    120_000,
  );
});

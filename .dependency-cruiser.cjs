// `npm run cycles` (CI): the layers of docs/architecture.md, and no import cycle anywhere, type-only
// ones included (shared types live in leaf modules: src/types.ts and src/types/, src/runtimeTypes.ts,
// src/http/types.ts).
//
//   cli/, infra/, bench/, test/   may import anything below them
//   functions/                    the Worker: may import src/ and example/ (this repository's app)
//   src/                          the library, the HTTP app (src/http/) and the Node runtime
//                                 (src/node/): imports nothing above it
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "an import cycle ties modules into one knot (type-only ones too: none can be read or moved alone)",
      from: {},
      to: { circular: true },
    },
    {
      name: "src-points-down",
      severity: "error",
      comment: "src/ is below every runtime entry and tool: it imports none of them",
      from: { path: "^src/" },
      to: { path: "^(functions|cli|infra|bench|test|example)/" },
    },
    {
      name: "http-below-node",
      severity: "error",
      comment: "the HTTP app is runtime-neutral: the Node runtime imports it, never the other way",
      from: { path: "^src/http/" },
      to: { path: "^src/node/" },
    },
    {
      name: "src-framework-neutral",
      severity: "error",
      comment: "the package (corqueue/testing included) runs under any test runner: no test framework in src/",
      from: { path: "^src/" },
      to: { path: "node_modules/(vitest|@vitest|jest|@jest|mocha|chai|sinon)/" },
    },
    {
      name: "functions-points-down",
      severity: "error",
      comment: "the Worker imports the library, the HTTP app and the example app, not the tools",
      from: { path: "^functions/" },
      to: { path: "^(cli|infra|bench|test)/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".tsx", ".js"] },
  },
};

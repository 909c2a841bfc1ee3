// `npm run cycles` (CI): no import cycle. In src/ not even a type-only one: public types live in
// types.ts, which imports no implementation. functions/ still has three type-only cycles through
// env.ts (it names OpenCorq, AuthThrottle and Principal, whose modules read env's settings), so
// outside src/ type-only imports are left out for now.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "an import cycle ties modules into one knot (../shared/STYLE.md)",
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ["type-only"] } },
    },
    {
      name: "no-circular-in-src",
      severity: "error",
      comment: "src/ has no cycle, type-only ones included: the Corq interface lives in types.ts",
      from: { path: "^src/" },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".tsx", ".js"] },
  },
};

// `npm run cycles` (CI): no import cycle. Type-only imports are left out for now: the
// `Corq` interface still closes a type-only cycle (types.ts → corq.ts) that the restructure
// of issue 13 item 6 removes; then drop `viaOnly` and the check covers them too.
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
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".tsx", ".js"] },
  },
};

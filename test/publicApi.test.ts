// The package's main entry is the user's API: the runtimes' machinery (consumer slots, kicks,
// the horizon probe, ready-key counts) is in src/internal.ts only. Checked by the type checker
// (`npm run typecheck` covers test/) and at run time.
import { describe, expect, expectTypeOf, it } from "vitest";
import * as main from "../src/index.js";
import type { Corq } from "../src/index.js";
import type { CorqRuntime } from "../src/internal.js";

describe("the main entry", () => {
  it("exports createCorq, not the runtimes' constructor", () => {
    expect(Object.keys(main)).toContain("createCorq");
    expect(Object.keys(main)).not.toContain("createCorqRuntime");
  });

  it("types Corq without the runtimes' machinery, which CorqRuntime has", () => {
    expectTypeOf<Corq>().not.toHaveProperty("claimSlots");
    expectTypeOf<Corq>().not.toHaveProperty("releaseSlot");
    expectTypeOf<Corq>().not.toHaveProperty("horizonWaiting");
    expectTypeOf<Corq>().not.toHaveProperty("kick");
    expectTypeOf<Corq>().not.toHaveProperty("readyKeys");
    expectTypeOf<CorqRuntime>().toHaveProperty("claimSlots");
    expectTypeOf<CorqRuntime>().toHaveProperty("readyKeys");
    expectTypeOf<CorqRuntime>().toMatchTypeOf<Corq>();
  });
});

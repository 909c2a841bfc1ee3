// CORQ_CELLS and CORQ_DIRECTORY_URL as parseCellsEnv reads them (src/cells/cellsEnv.ts): the
// cells in order, a URL's "=" kept, and errors that name the entry without its password.
import { describe, expect, it } from "vitest";
import { parseCellsEnv } from "../../src/cells/cellsEnv.js";

const one = "postgres://corq:s3cret@db-one:5432/corq";
const two = "postgresql://corq:s3cret@db-two/corq?sslmode=require&application_name=x=y";

function refusal(env: Record<string, string | undefined>): string {
  try {
    parseCellsEnv(env);
  } catch (error) {
    expect(error).toMatchObject({ code: "invalid_config" });
    return (error as Error).message;
  }
  throw new Error("not refused");
}

describe("parseCellsEnv", () => {
  it("reads name=url pairs separated by spaces or newlines, home first, splitting on the first = only", () => {
    const parsed = parseCellsEnv({ CORQ_CELLS: `\n  home=${one}\n\ttwo_2-b=${two}  \n` });
    expect(parsed).toEqual({ cells: { home: one, "two_2-b": two } });
    expect(Object.keys(parsed.cells)).toEqual(["home", "two_2-b"]);
  });

  it("takes CORQ_DIRECTORY_URL when it is set, and leaves it out when it is empty", () => {
    const directory = "postgres://dir:pw@db-dir/corq";
    expect(parseCellsEnv({ CORQ_CELLS: `one=${one}`, CORQ_DIRECTORY_URL: directory })).toEqual({
      cells: { one },
      directoryUrl: directory,
    });
    expect(parseCellsEnv({ CORQ_CELLS: `one=${one}`, CORQ_DIRECTORY_URL: " " })).toEqual({ cells: { one } });
  });

  it("refuses a missing or bad entry with a message naming it, never its password", () => {
    const cases: [Record<string, string | undefined>, RegExp][] = [
      [{}, /^CORQ_CELLS is not set/],
      [{ CORQ_CELLS: " \n " }, /^CORQ_CELLS is not set/],
      [{ CORQ_CELLS: one }, /^CORQ_CELLS entry 1 is not name=postgres:\/\/…: "postgres:\/\/db-one:5432…"$/],
      // a URL with "=" in its query but no name: the "name" is the URL up to its "=": not shown
      [{ CORQ_CELLS: `one=${one} ${two}` }, /^CORQ_CELLS entry 2: the cell name "postgresql:\/\/db-two…" is not/],
      [{ CORQ_CELLS: `one=${one} b@d=${one}` }, /^CORQ_CELLS entry 2: the cell name \(not shown\) is not/],
      [{ CORQ_CELLS: `one=${one} c.d=${one}` }, /^CORQ_CELLS entry 2: the cell name "c.d" is not/],
      // libpq's key=value form is not read: its password is not shown either
      [{ CORQ_CELLS: "host=db password=s3cret" }, /^CORQ_CELLS entry 1: cell "host" has \(not shown\), not a postgres/],
      [{ CORQ_CELLS: `${"x".repeat(41)}=${one}` }, /entry 1: the cell name "x{40}…" is not 1-40 letters/],
      [{ CORQ_CELLS: `=${one}` }, /entry 1: the cell name nothing is not/],
      [{ CORQ_CELLS: `one=${one} one=${two}` }, /^CORQ_CELLS entry 2: cell "one" is named twice$/],
      [{ CORQ_CELLS: "one=" }, /^CORQ_CELLS entry 1: cell "one" has nothing, not a postgres/],
      [{ CORQ_CELLS: "one=mysql://u:s3cret@h/db" }, /cell "one" has "mysql:\/\/h…", not a postgres:\/\//],
      [{ CORQ_CELLS: "one=localhost:5432" }, /cell "one" has \(not shown\), not a postgres/],
      [{ CORQ_CELLS: "one=u:s3cret@localhost" }, /cell "one" has \(not shown\), not a postgres/],
      [{ CORQ_CELLS: `one=${one}`, CORQ_DIRECTORY_URL: "http://u:s3cret@h" }, /^CORQ_DIRECTORY_URL \("http:\/\/h…"\)/],
      // "2" would be listed before "b": the home cell would change
      [{ CORQ_CELLS: `b=${one} 2=${two}` }, /names b, 2 would be read in another order/],
    ];
    for (const [env, expected] of cases) {
      const message = refusal(env);
      expect({ env, message }).toEqual({ env, message: expect.stringMatching(expected) });
      expect(message).not.toContain("s3cret");
    }
  });

  it("keeps names of digits that are already in order", () => {
    expect(Object.keys(parseCellsEnv({ CORQ_CELLS: `1=${one} 2=${two}` }).cells)).toEqual(["1", "2"]);
  });
});

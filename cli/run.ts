// The commands of `corq` (cli/main.ts), callable in-process (tests). Every command but
// `migrate` goes through the HTTP API (corqueue/client); `migrate` talks to DATABASE_URL.
// run() reads the arguments (arguments.ts), runs the command by name (commands.ts) and
// reports an error with its exit code (output.ts).
import { parseArgs } from "node:util";
import { createClient } from "../src/client.js";
import {
  commandOnlyOptions,
  joinNegativeValues,
  keyCommands,
  options,
  type Context,
  type Io,
  type Values,
} from "./arguments.js";
import { commands } from "./commands.js";
import { exitCodes, report, usage } from "./output.js";

export type { Io };

export async function run(argv: string[], io: Io): Promise<number> {
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({ args: joinNegativeValues(argv), options, allowPositionals: true, strict: true });
  } catch (error) {
    io.err.write(`corq: ${(error as Error).message}\n\n${usage}`);
    return exitCodes.usage;
  }
  const { values, positionals } = parsed;
  const [name, ...args] = positionals;
  if (values.help || name === "help") {
    io.out.write(usage);
    return exitCodes.ok;
  }
  const command = name === undefined ? undefined : commands[name];
  if (!command) {
    io.err.write(`${name === undefined ? "" : `corq: unknown command: ${name}\n\n`}${usage}`);
    return exitCodes.usage;
  }
  // a --key another command would ignore could widen what it does (skip every dead key): refused
  if (values.key !== undefined && !keyCommands.has(name as string)) {
    io.err.write(`corq: ${name} takes no --key\n`);
    return exitCodes.usage;
  }
  for (const [option, only] of Object.entries(commandOnlyOptions)) {
    if (values[option as keyof Values] !== undefined && !only.includes(name as string)) {
      io.err.write(`corq: ${name} takes no --${option}\n`);
      return exitCodes.usage;
    }
  }
  const url = values.url ?? io.env.CORQ_URL ?? "http://127.0.0.1:8787";
  // a URL without its scheme (`localhost:8787`) parses as something else entirely: said here,
  // as a wrong command line, not later as a server that does not answer
  if (!isHttpUrl(url)) {
    io.err.write(
      `corq: ${values.url !== undefined ? "--url" : "CORQ_URL"} must be an http:// or https:// URL, like http://127.0.0.1:8787 (got "${url}")\n`,
    );
    return exitCodes.usage;
  }
  const token = values.token ?? io.env.CORQ_TOKEN ?? io.env.CORQ_ADMIN_TOKEN;
  const ctx: Context = {
    client: createClient({ url, token, fetch: io.fetch }),
    values,
    args,
    io,
    print: (value, table) => io.out.write(`${values.json ? JSON.stringify(value, null, 2) : table()}\n`),
  };
  try {
    return (await command(ctx)) ?? exitCodes.ok;
  } catch (error) {
    return report(error, { io, url });
  }
}

function isHttpUrl(text: string): boolean {
  try {
    const { protocol } = new URL(text);
    return protocol === "http:" || protocol === "https:";
  } catch {
    return false;
  }
}

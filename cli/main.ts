#!/usr/bin/env node
// `corq`: the command line over corq's HTTP API (and `corq migrate` over DATABASE_URL).
import { run } from "./run.js";

process.exitCode = await run(process.argv.slice(2), { env: process.env, out: process.stdout, err: process.stderr });

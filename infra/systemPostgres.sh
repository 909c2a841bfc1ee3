#!/usr/bin/env bash
# A throwaway cluster of Debian's PostgreSQL (JIT on, every other setting its default) on a free
# port and a data directory of its own: what users run (Debian/Ubuntu packages, RDS, Cloud SQL
# and Aiven all ship JIT on), where the embedded PostgreSQL from npm has no JIT provider.
#   infra/systemPostgres.sh start [major]   installs postgresql-<major> (default 15) where missing,
#                                           starts the cluster, prints its DATABASE_URL
#   infra/systemPostgres.sh start <bin-dir> the same with the binaries there (the embedded
#                                           PostgreSQL of another major: infra/planTestsOnMajors.sh)
#   infra/systemPostgres.sh stop <url>      stops it and deletes its data directory
# CORQ_PG_SETTINGS="name=value …" adds server settings (the cost bench: shared_preload_libraries=pg_stat_statements).
# Used by .ci/run (the suite on both servers) and by hand for the bench:
#   export DATABASE_URL=$(infra/systemPostgres.sh start) && npm run bench -- --quick
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
# Postgres refuses to run as root: the cluster belongs to the postgres user where we are root.
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "${1:-}" in
  start)
    major="${2:-15}"
    case "$major" in
      /*)
        bin="$major"
        major="$(basename "$(dirname "$(dirname "$bin")")")"
        [ -x "$bin/postgres" ] || { echo "$0: no PostgreSQL binaries in $bin (npm ci installs them)" >&2; exit 1; }
        ;;
      *) bin="/usr/lib/postgresql/$major/bin" ;;
    esac
    if [ ! -x "$bin/postgres" ]; then
      as_root apt-get update -qq >&2
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$major" >&2
      # the package makes and starts a cluster of its own on 5432: not ours, not wanted
      as_root pg_ctlcluster "$major" main stop >/dev/null 2>&1 || true
    fi
    # (as root, initdb runs as the postgres user, which the embedded-postgres package and Debian's
    # postgresql package both create; it must be able to read the binaries)
    id postgres >/dev/null 2>&1 || [ "$(id -u)" != 0 ] || as_root useradd --system --no-create-home postgres
    dir="$(mktemp -d "/tmp/corq-pg-$major.XXXXXX")"
    trap 'rm -rf "$dir"' ERR
    [ "$(id -u)" != 0 ] || chown postgres: "$dir"
    # a free port: the kernel's choice for a socket bound to port 0
    port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
    echo "$bin" >"$dir/bin"
    # a password of its own (as Neon and the embedded clusters have): a wrong one is refused (28P01)
    password="$(node -e 'console.log(require("crypto").randomBytes(18).toString("base64url"))')"
    echo "$password" >"$dir/password"
    [ "$(id -u)" != 0 ] || chown postgres: "$dir/password"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth-host=scram-sha-256 --auth-local=trust \
      --pwfile="$dir/password" --no-sync >/dev/null
    settings=""
    for setting in ${CORQ_PG_SETTINGS:-}; do settings="$settings -c $setting"; done
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
      -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir$settings" start >/dev/null
    echo "postgres://postgres:$password@127.0.0.1:$port/postgres"
    ;;
  stop)
    port="$(node -e 'console.log(new URL(process.argv[1]).port)' "${2:?the url start printed}")"
    for data in /tmp/corq-pg*/data; do
      [ -f "$data/postmaster.pid" ] || continue
      if [ "$(sed -n 4p "$data/postmaster.pid")" = "$port" ]; then
        as_owner "$(cat "$(dirname "$data")/bin")/pg_ctl" -D "$data" -m fast -w stop >/dev/null
        rm -rf "$(dirname "$data")"
      fi
    done
    ;;
  *)
    echo "usage: $0 start [major] | stop <url>" >&2
    exit 2
    ;;
esac

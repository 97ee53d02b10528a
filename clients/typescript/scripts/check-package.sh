#!/usr/bin/env bash
# Installs the package as npm users do and uses it against a real idemd:
#
#   IDEMD_BIN=target/debug/idemd clients/typescript/scripts/check-package.sh
#
# npm pack (of the build run-tests just made), then in fresh temporary projects, one a
# default `npm init` (CommonJS) and one with "type": "module", `npm install` of the
# tarball (its dependencies from npm's registry or cache); each runs a Claim, a Complete
# and executeOnce through require() / import against idemd on an embedded store, and
# tsc --noEmit type-checks a .ts consumer in each against the declarations its
# condition picks (module nodenext, and node10 for the CommonJS one). Also checks what the tarball holds (no protos, both builds).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
: "${IDEMD_BIN:?check-package.sh needs IDEMD_BIN (an idemd binary)}"
IDEMD_BIN="$(realpath "$IDEMD_BIN")"

work="$(mktemp -d "${TMPDIR:-/tmp}/idemd-ts-package.XXXXXX")"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-package: $*" >&2; exit 1; }

# --ignore-scripts: pack what run-tests built rather than building again (prepare).
tarball="$work/$(cd "$here" && npm pack --ignore-scripts --silent --pack-destination "$work" | tail -n 1)"
[ -f "$tarball" ] || fail "npm pack wrote no tarball"
contents="$(tar -tzf "$tarball")"
for want in package/dist/src/index.js package/dist/src/index.d.ts package/dist/cjs/index.js \
  package/dist/cjs/index.d.ts package/dist/cjs/package.json package/dist/src/gen/idem/v1/idempotency.js; do
  grep -qx "$want" <<<"$contents" || fail "the tarball lacks ${want#package/}"
done
if grep -E '\.proto$|^package/proto/|^package/dist/test/|^package/dist/examples/' <<<"$contents"; then
  fail "the tarball holds protos, tests or examples (above)"
fi

# idemd on an embedded store in $work, on a free port; a fresh tenant's token. Its
# environment is only this (as the tests' harness does): a DATABASE_URL or IDEMD_*
# setting of the caller's must not point it at another store.
idemd() {
  exec env -i PATH="$PATH" IDEMD_DATA_DIR="$work/data" IDEMD_METRICS_LISTEN=off IDEMD_LOG_FORMAT=json RUST_LOG=info \
    IDEMD_INSECURE_PLAINTEXT=true \
    "$IDEMD_BIN" "$@"
}
token="$(idemd tenant create package-check 2>"$work/tenant.log")" || fail "tenant create: $(cat "$work/tenant.log")"
idemd serve --listen 127.0.0.1:0 2>"$work/serve.log" >/dev/null &
server_pid=$!
addr=""
for _ in $(seq 1 300); do
  addr="$(sed -n 's/.*"idemd serving".*"listen":"\([^"]*\)".*/\1/p' "$work/serve.log" | head -n 1)"
  [ -n "$addr" ] && break
  kill -0 "$server_pid" 2>/dev/null || fail "idemd exited: $(cat "$work/serve.log")"
  sleep 0.1
done
[ -n "$addr" ] || fail "idemd did not start: $(cat "$work/serve.log")"

tsc="$here/node_modules/.bin/tsc"
types_node="$(node -p "require('$here/node_modules/@types/node/package.json').version")"
for kind in commonjs module; do
  project="$work/$kind"
  mkdir "$project"
  cp "$here/scripts/package-check/"{check.cjs,check.mjs,common.cjs,consumer.ts} "$project/"
  echo "check-package: the $kind project"
  # A subshell whose status is tested would run with errexit off: this one is not.
  (
    cd "$project"
    npm init -y >/dev/null
    if [ "$kind" = module ]; then npm pkg set type=module; fi
    npm install --prefer-offline --no-audit --no-fund --loglevel=error "$tarball" "@types/node@$types_node" >/dev/null
    if [ "$kind" = module ]; then script=check.mjs; else script=check.cjs; fi
    IDEMD_ADDR="http://$addr" IDEMD_TOKEN="$token" node "$script"
    # The types as each kind of project resolves them: the build its condition picks
    # (consumer.ts fails if they resolved to any).
    if [ "$kind" = module ]; then want=dist/src/index.d.ts; else want=dist/cjs/index.d.ts; fi
    tsc_check() {
      if ! "$tsc" --noEmit --strict --skipLibCheck --types node --target es2022 --listFiles "$@" consumer.ts >tsc.out; then
        grep -v '^/' tsc.out >&2
        fail "tsc $* failed on the $kind consumer"
      fi
      grep -q "node_modules/@idemd/client/$want\$" tsc.out || fail "tsc $* did not resolve $want"
    }
    tsc_check --module nodenext --moduleResolution nodenext
    if [ "$kind" = commonjs ]; then tsc_check --module commonjs --moduleResolution node10 --esModuleInterop; fi
    echo "$kind: tsc --noEmit on a .ts consumer ok"
  )
done
echo "check-package: the packed tarball works from CommonJS and ESM, with its types"

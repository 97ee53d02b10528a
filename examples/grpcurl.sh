#!/usr/bin/env bash
# The README's walk through with grpcurl, as a script: Claim, Complete, a retry
# answered with the stored result, and the same key with another request refused.
#
#   cargo run --release -- serve --dev      # in another terminal, from the repository root
#   examples/grpcurl.sh
#
# IDEMD_ADDR (default localhost:50051) and IDEMD_TOKEN (default: the token that
# `serve --dev` keeps in idemd-data/dev-token) say where to call and as whom. KEY is
# the idempotency key; by default a new one per run, so the walk through repeats.
# Needs grpcurl; reflection is served, so no proto files.
set -euo pipefail

readonly addr=${IDEMD_ADDR:-localhost:50051}
if [[ -n ${IDEMD_TOKEN:-} ]]; then
  token=$IDEMD_TOKEN
elif [[ -r idemd-data/dev-token ]]; then
  token=$(<idemd-data/dev-token)
else
  echo "grpcurl.sh: set IDEMD_TOKEN, or run from where 'idemd serve --dev' keeps idemd-data/" >&2
  exit 2
fi
readonly token
readonly key=${KEY:-order-$(date +%s)}

# call METHOD JSON: one authorized call of idem.v1.IdempotencyService.
call() {
  grpcurl -plaintext -H "authorization: Bearer $token" -d "$2" "$addr" "idem.v1.IdempotencyService/$1"
}

# claim JSON_PAYLOAD: a Claim of payments.charge/$key; the payload is a JSON
# document inside a JSON string, its quotes escaped.
claim() {
  call Claim "$(printf '{"scope": {"operation": "payments.charge", "key": "%s"}, "json_payload": "%s"}' "$key" "$1")"
}

# field NAME: the first string value of NAME in the JSON on stdin.
field() {
  sed -n "s/.*\"$1\": *\"\\([^\"]*\\)\".*/\\1/p" | head -n 1
}

echo "== services"
grpcurl -plaintext "$addr" list

echo "== claim $key: the payload is fingerprinted, never stored"
claimed=$(claim '{\"amount\":1000,\"currency\":\"EUR\"}')
echo "$claimed"
if ! grep -q '"acquired"' <<<"$claimed"; then
  echo "grpcurl.sh: not acquired (KEY already used?); nothing to execute" >&2
  exit 1
fi
operation_id=$(field operationId <<<"$claimed")
fence=$(field fence <<<"$claimed")

echo "== we own it: the effect runs here, then complete with its result and our fence"
# The body is base64 of {"charge":"ch_1"}.
call Complete "$(printf '{"operation_id": "%s", "fence": %s, "result": {"body": "eyJjaGFyZ2UiOiJjaF8xIn0=", "content_type": "application/json"}}' "$operation_id" "$fence")"

echo "== a retry of the same request, keys in another order: the stored result, nothing executed"
claim '{\"currency\":\"EUR\",\"amount\":1000}'

echo "== the same key with a different request: refused"
if refused=$(claim '{\"amount\":2000,\"currency\":\"EUR\"}' 2>&1); then
  echo "grpcurl.sh: expected IDEMPOTENCY_KEY_REUSED, got: $refused" >&2
  exit 1
fi
echo "$refused"
grep -q IDEMPOTENCY_KEY_REUSED <<<"$refused"

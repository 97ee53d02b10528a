#!/usr/bin/env bash
# The walk-through with grpcurl (docs/walkthrough.md), as a script: Claim, Complete with
# the operation_id and fence the Claim answered, a retry answered with the stored
# result, and the same key with another request refused. Everything after
# `set -euo pipefail` is what that page shows, command for command
# (tests/docs/check_walkthroughs.py holds them equal).
#
#   cargo run --release -- serve --dev      # in another terminal, at the repository root
#   examples/grpcurl.sh                     # from the repository root
#
# IDEMD_ADDR (default 127.0.0.1:50051) and IDEMD_TOKEN (default: the token that
# `serve --dev` keeps in idemd-data/dev-token) say where to call and as whom; each
# run makes a fresh idempotency key. Needs grpcurl and jq. examples/run-walkthroughs
# runs it against a server of its own.
set -euo pipefail
IDEMD_ADDR=${IDEMD_ADDR:-127.0.0.1:50051}
IDEMD_TOKEN=${IDEMD_TOKEN:-$(cat idemd-data/dev-token)}  # or the token `idemd tenant create` printed
grpcurl -plaintext "$IDEMD_ADDR" list
KEY=order-grpcurl-$(date +%s)  # made once per business intent, kept until it is done
# idem_grpc METHOD: one call of idem.v1.IdempotencyService, the request JSON on stdin
idem_grpc() {
  grpcurl -plaintext -format-error -H "authorization: Bearer $IDEMD_TOKEN" -d @ \
    "$IDEMD_ADDR" "idem.v1.IdempotencyService/$1"
}
CLAIMED=$(idem_grpc Claim <<EOF
{"scope": {"operation": "payments.charge", "key": "$KEY"}, "json_payload": "{\"amount\":1000,\"currency\":\"EUR\"}"}
EOF
)
echo "$CLAIMED"
OPERATION_ID=$(jq -er .acquired.ownership.operationId <<<"$CLAIMED")
FENCE=$(jq -er .acquired.ownership.fence <<<"$CLAIMED")
# The body is base64 of {"charge":"ch_1"}.
idem_grpc Complete <<EOF
{"operation_id": "$OPERATION_ID", "fence": "$FENCE", "result": {"body": "eyJjaGFyZ2UiOiJjaF8xIn0="}}
EOF
idem_grpc Claim <<EOF | jq -e .completed
{"scope": {"operation": "payments.charge", "key": "$KEY"}, "json_payload": "{\"currency\":\"EUR\",\"amount\":1000}"}
EOF
REFUSAL=$(idem_grpc Claim 2>&1 <<EOF
{"scope": {"operation": "payments.charge", "key": "$KEY"}, "json_payload": "{\"amount\":2000,\"currency\":\"EUR\"}"}
EOF
) || echo "refused, as it should be: grpcurl exits non-zero on an error status"
jq -e '.details[] | select(.reason == "IDEMPOTENCY_KEY_REUSED")' <<<"$REFUSAL"

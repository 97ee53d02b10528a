#!/usr/bin/env bash
# The walk-through with curl (docs/walkthrough.md), as a script: the same RPCs over the
# Connect protocol's JSON mapping (HTTP/1.1, no gRPC stack): Claim, then Complete with
# the operation_id and fence the Claim answered. Everything after `set -euo pipefail`
# is what the README shows, command for command (tests/docs/check_walkthroughs.py
# holds them equal).
#
#   cargo run --release -- serve --dev      # in another terminal, at the repository root
#   examples/curl.sh                        # from the repository root
#
# IDEMD_ADDR (default 127.0.0.1:50051) and IDEMD_TOKEN (default: the token that
# `serve --dev` keeps in idemd-data/dev-token) say where to call and as whom; each
# run makes a fresh idempotency key. Needs curl 7.76 or later (--fail-with-body) and
# jq. examples/run-walkthroughs runs it against a server of its own.
set -euo pipefail
IDEMD_ADDR=${IDEMD_ADDR:-127.0.0.1:50051}
IDEMD_TOKEN=${IDEMD_TOKEN:-$(cat idemd-data/dev-token)}  # or the token `idemd tenant create` printed
KEY=order-curl-$(date +%s)  # a key of its own: the grpcurl walk-through's is done
# idem_json METHOD: one call of idem.v1.IdempotencyService, the request JSON on stdin
idem_json() {
  curl -sS --fail-with-body "http://$IDEMD_ADDR/idem.v1.IdempotencyService/$1" \
    -H "Authorization: Bearer $IDEMD_TOKEN" -H "Content-Type: application/json" -d @-
}
CLAIMED=$(idem_json Claim <<EOF
{"scope": {"operation": "payments.charge", "key": "$KEY"}, "jsonPayload": "{\"amount\":1000,\"currency\":\"EUR\"}"}
EOF
)
echo "$CLAIMED"
OPERATION_ID=$(jq -er .acquired.ownership.operationId <<<"$CLAIMED")
FENCE=$(jq -er .acquired.ownership.fence <<<"$CLAIMED")
idem_json Complete <<EOF | jq .
{"operationId": "$OPERATION_ID", "fence": "$FENCE", "result": {"body": "eyJjaGFyZ2UiOiJjaF8xIn0="}}
EOF
REFUSAL=$(idem_json Claim <<EOF
{"scope": {"operation": "payments.charge", "key": "$KEY"}, "jsonPayload": "{\"amount\":2000,\"currency\":\"EUR\"}"}
EOF
) || echo "refused, as it should be: curl --fail-with-body exits non-zero on an HTTP error"
jq -e '.details[].debug | select(.reason == "IDEMPOTENCY_KEY_REUSED")' <<<"$REFUSAL"

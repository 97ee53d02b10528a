//! testdata/fingerprints.json through the API: every vector's payload, sent as
//! `json_payload` or `bytes_payload`, is stored with the vector's fingerprint
//! (or refused, INVALID_ARGUMENT), and the same fingerprint sent precomputed
//! matches it. The pure implementation is checked against the same file in
//! crates/idemd-domain/src/fingerprint.rs; testdata/fingerprints.py checks the file itself.
//! The fingerprint is computed before any store is involved, so one store is
//! enough.

use idemd::proto;
use idemd::proto::claim_request::RequestIdentity;
use serde_json::Value;
use tonic::Code;

use crate::harness::*;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

fn claim(key: &str, identity: RequestIdentity) -> proto::ClaimRequest {
    proto::ClaimRequest {
        scope: scope("vectors.check", key),
        request_identity: Some(identity),
        ..proto::ClaimRequest::default()
    }
}

#[tokio::test]
async fn every_shared_fingerprint_vector_is_what_the_server_stores() {
    let file: Value = serde_json::from_str(include_str!("../../testdata/fingerprints.json"))
        .expect("testdata/fingerprints.json is JSON");
    let vectors = file["vectors"].as_array().expect("vectors");
    let world = World::start(Backend::sqlite().await).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;

    for (index, vector) in vectors.iter().enumerate() {
        let key = format!("vector-{index}");
        let name = vector["name"].as_str().expect("name");
        let identity = match vector["mode"].as_str() {
            Some("json") => {
                RequestIdentity::JsonPayload(vector["input"].as_str().expect("input").to_owned())
            }
            Some("bytes") => {
                RequestIdentity::BytesPayload(unhex(vector["input_hex"].as_str().expect("hex")))
            }
            mode => panic!("{name}: unknown mode {mode:?}"),
        };
        let answer = client.claim(authorized(token, claim(&key, identity))).await;
        if let Some(why) = vector["refused"].as_str() {
            let status = answer.expect_err(name);
            assert_eq!(status.code(), Code::InvalidArgument, "{name}: {why}");
            let fields = violated_fields(&status);
            assert_eq!(fields, ["json_payload"], "{name}");
            continue;
        }
        let expected = vector["fingerprint"].as_str().expect("fingerprint");
        let claimed = answer.unwrap_or_else(|status| panic!("{name}: {status:?}"));
        assert_eq!(outcome_name(claimed.get_ref()), "acquired", "{name}");
        let found = client
            .lookup(authorized(
                token,
                proto::LookupRequest {
                    target: Some(proto::lookup_request::Target::Scope(
                        scope("vectors.check", &key).expect("scope"),
                    )),
                    include_history: false,
                    ..Default::default()
                },
            ))
            .await
            .expect("lookup")
            .into_inner();
        let stored = found.operation.expect("operation").fingerprint;
        assert_eq!(hex(&stored), expected, "{name}");

        // A client that computed the fingerprint itself claims the same
        // request: told Pending (the lease is live), never IDEMPOTENCY_KEY_REUSED.
        let precomputed = client
            .claim(authorized(
                token,
                claim(&key, RequestIdentity::Fingerprint(unhex(expected))),
            ))
            .await
            .unwrap_or_else(|status| panic!("{name}: {status:?}"))
            .into_inner();
        assert_eq!(outcome_name(&precomputed), "pending", "{name}");
    }
}

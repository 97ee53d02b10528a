//! The tools' arguments (their JSON schemas come from these types) and the
//! requests they make. Pure: what an argument means is pinned by unit tests,
//! and a request the arguments cannot name is refused before anything is
//! sent. Enum values are the proto's own names, so that what an agent sends
//! and what it reads back (DiagnoseResponse) speak one vocabulary.

use std::borrow::Cow;

use base64::Engine as _;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer};

use crate::proto::{
    self, DiagnoseConstraints, DiagnoseEvidence, DiagnoseRequest, ListUnresolvedRequest,
    NotApplied, OperationError, ReconcileRequest, diagnose_evidence::RequestIdentity,
    reconcile_request::Resolution,
};

/// Arguments that cannot make a request: said to the agent, nothing sent.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ArgumentError(pub(super) String);

fn invalid(message: impl Into<String>) -> ArgumentError {
    ArgumentError(message.into())
}

/// The descriptions of the three fields that name an operation, in every
/// tool that takes one.
const OPERATION_ID: &str = "The server's id of the operation (from lookup or list_unresolved, or the caller's Claim). Give either this, or operation and key.";
const OPERATION: &str = "The caller's operation name, e.g. payments.charge (with key).";
const KEY: &str = "The caller's idempotency key (with operation).";

/// The one target both Lookup and Diagnose take (their oneofs have the same
/// two members).
pub(super) enum Target {
    OperationId(String),
    Scope(proto::Scope),
}

/// Which operation: by the server's id, or by the caller's name and key.
fn target(
    operation_id: Option<String>,
    operation: Option<String>,
    key: Option<String>,
) -> Result<Target, ArgumentError> {
    let present = |value: Option<String>| value.filter(|value| !value.is_empty());
    match (present(operation_id), present(operation), present(key)) {
        (Some(operation_id), None, None) => Ok(Target::OperationId(operation_id)),
        (None, Some(operation), Some(key)) => Ok(Target::Scope(proto::Scope { operation, key })),
        _ => Err(invalid(
            "name the operation either by operation_id, or by operation and key (not both)",
        )),
    }
}

impl From<Target> for proto::lookup_request::Target {
    fn from(target: Target) -> Self {
        match target {
            Target::OperationId(id) => Self::OperationId(id),
            Target::Scope(scope) => Self::Scope(scope),
        }
    }
}

impl From<Target> for proto::diagnose_request::Target {
    fn from(target: Target) -> Self {
        match target {
            Target::OperationId(id) => Self::OperationId(id),
            Target::Scope(scope) => Self::Scope(scope),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LookupArguments {
    #[serde(default)]
    #[schemars(description = OPERATION_ID)]
    pub(super) operation_id: Option<String>,
    #[serde(default)]
    #[schemars(description = OPERATION)]
    pub(super) operation: Option<String>,
    #[serde(default)]
    #[schemars(description = KEY)]
    pub(super) key: Option<String>,
    /// Also return the operation's history (every transition, oldest first).
    #[serde(default)]
    pub(super) include_history: bool,
}

impl LookupArguments {
    pub(super) fn target(&self) -> Result<Target, ArgumentError> {
        target(
            self.operation_id.clone(),
            self.operation.clone(),
            self.key.clone(),
        )
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListUnresolvedArguments {
    /// Only operations of this name.
    #[serde(default)]
    pub(super) operation: Option<String>,
    /// At most this many (default 100; the server clamps it to 1000).
    #[serde(default)]
    pub(super) page_size: Option<u32>,
    /// The previous answer's next_page_token, unchanged, for the next page.
    #[serde(default)]
    pub(super) page_token: Option<String>,
}

impl ListUnresolvedArguments {
    pub(super) fn request(self) -> ListUnresolvedRequest {
        ListUnresolvedRequest {
            operation: self.operation.unwrap_or_default(),
            page_size: self.page_size.unwrap_or_default(),
            page_token: self.page_token.unwrap_or_default(),
        }
    }
}

/// The JSON schema of a string that holds one of a proto enum's names.
macro_rules! proto_enum_schema {
    ($function:ident, $enum:ty, $description:literal) => {
        fn $function(_generator: &mut SchemaGenerator) -> Schema {
            // Every value the generated enum knows, in number order: the
            // schema follows the proto without a list kept by hand.
            let names: Vec<&'static str> = (0..=i32::from(u8::MAX))
                .filter_map(|number| <$enum>::try_from(number).ok())
                .map(|value| value.as_str_name())
                .collect();
            json_schema!({
                "type": "string",
                "enum": names,
                "description": $description,
            })
        }
    };
}

proto_enum_schema!(
    symptom_schema,
    proto::Symptom,
    "What happened to the caller's call (default SYMPTOM_UNSPECIFIED: diagnose from the record alone)."
);
proto_enum_schema!(
    provider_finding_schema,
    proto::ProviderFinding,
    "What the caller found at the provider, if it looked (needs provider_looked_ago_seconds)."
);
proto_enum_schema!(
    authority_schema,
    proto::Authority,
    "How far the caller may go: AUTHORITY_READ_ONLY (look, wait, ask), AUTHORITY_RETRY (Claim too), AUTHORITY_RECONCILE (Reconcile too); unset: as far as the credential's scopes allow."
);

/// A proto enum's value from its name; absent or empty: the zero value.
fn proto_enum<E: Into<i32>>(
    field: &str,
    name: Option<&str>,
    from_name: fn(&str) -> Option<E>,
) -> Result<i32, ArgumentError> {
    match name.filter(|name| !name.is_empty()) {
        None => Ok(0),
        Some(name) => from_name(name).map(Into::into).ok_or_else(|| {
            invalid(format!(
                "{field}: {name:?} is not one of the schema's values"
            ))
        }),
    }
}

fn seconds(seconds: u64) -> pbjson_types::Duration {
    pbjson_types::Duration {
        seconds: i64::try_from(seconds).unwrap_or(i64::MAX),
        nanos: 0,
    }
}

/// What the caller observed: DiagnoseEvidence field by field.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EvidenceArguments {
    #[serde(default)]
    #[schemars(schema_with = "symptom_schema")]
    pub(super) symptom: Option<String>,
    /// With SYMPTOM_ERROR_STATUS: the gRPC status code, a number 1-16.
    #[serde(default)]
    pub(super) status_code: Option<u32>,
    /// With SYMPTOM_ERROR_STATUS: the ErrorInfo reason it carried, e.g.
    /// IDEMPOTENCY_KEY_REUSED.
    #[serde(default)]
    pub(super) error_reason: Option<String>,
    /// The request the caller would send now, as a client-computed
    /// fingerprint: 64 hex digits (32 bytes). At most one of
    /// fingerprint_hex, json_payload, bytes_payload_base64.
    #[serde(default)]
    pub(super) fingerprint_hex: Option<String>,
    /// The request the caller would send now, as its JSON payload
    /// (fingerprinted as Claim does; never stored).
    #[serde(default)]
    pub(super) json_payload: Option<String>,
    /// The request the caller would send now, as opaque bytes in base64.
    #[serde(default)]
    pub(super) bytes_payload_base64: Option<String>,
    /// The caller made a new idempotency key for its retry.
    #[serde(default)]
    pub(super) new_key_for_retry: bool,
    #[serde(default)]
    #[schemars(schema_with = "provider_finding_schema")]
    pub(super) provider_finding: Option<String>,
    /// How many seconds ago the provider lookup was sent (counted by the
    /// caller). Required with provider_finding.
    #[serde(default)]
    pub(super) provider_looked_ago_seconds: Option<u64>,
    /// How many seconds ago the caller saw the symptom; unset: just now.
    #[serde(default)]
    pub(super) observed_ago_seconds: Option<u64>,
    /// Free text, at most 2 KiB: what else the caller saw. Never put a
    /// secret here: evidence carrying one is refused.
    #[serde(default)]
    pub(super) notes: Option<String>,
}

impl EvidenceArguments {
    fn evidence(self) -> Result<DiagnoseEvidence, ArgumentError> {
        let identities = [
            self.fingerprint_hex.as_ref().map(|hex| {
                decode_hex(hex)
                    .map(RequestIdentity::Fingerprint)
                    .ok_or_else(|| invalid("evidence.fingerprint_hex: not hex digits"))
            }),
            self.json_payload
                .clone()
                .map(|json| Ok(RequestIdentity::JsonPayload(json))),
            self.bytes_payload_base64.as_ref().map(|text| {
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map(RequestIdentity::BytesPayload)
                    .map_err(|_| invalid("evidence.bytes_payload_base64: not base64"))
            }),
        ];
        let mut given = identities.into_iter().flatten();
        let request_identity = given.next().transpose()?;
        if given.next().is_some() {
            return Err(invalid(
                "evidence: give at most one of fingerprint_hex, json_payload, bytes_payload_base64",
            ));
        }
        Ok(DiagnoseEvidence {
            symptom: proto_enum(
                "evidence.symptom",
                self.symptom.as_deref(),
                proto::Symptom::from_str_name,
            )?,
            status_code: self.status_code.unwrap_or_default(),
            error_reason: self.error_reason.unwrap_or_default(),
            request_identity,
            new_key_for_retry: self.new_key_for_retry,
            provider_finding: proto_enum(
                "evidence.provider_finding",
                self.provider_finding.as_deref(),
                proto::ProviderFinding::from_str_name,
            )?,
            provider_looked_ago: self.provider_looked_ago_seconds.map(seconds),
            observed_ago: self.observed_ago_seconds.map(seconds),
            notes: self.notes.unwrap_or_default(),
        })
    }
}

/// Lowercase or uppercase hex, two digits a byte.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|start| {
            text.get(start..start + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect()
}

/// The caller's own limits: DiagnoseConstraints field by field.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ConstraintArguments {
    #[serde(default)]
    #[schemars(schema_with = "authority_schema")]
    pub(super) authority: Option<String>,
    /// Only moves that can be undone or change nothing (look, wait, replay).
    #[serde(default)]
    pub(super) reversible_only: bool,
    /// The most new executions of the effect the caller may start.
    #[serde(default)]
    pub(super) attempt_budget: Option<u32>,
    /// The longest the caller may wait, in seconds.
    #[serde(default)]
    pub(super) wait_budget_seconds: Option<u64>,
}

impl ConstraintArguments {
    fn constraints(self) -> Result<DiagnoseConstraints, ArgumentError> {
        Ok(DiagnoseConstraints {
            authority: proto_enum(
                "constraints.authority",
                self.authority.as_deref(),
                proto::Authority::from_str_name,
            )?,
            reversible_only: self.reversible_only,
            attempt_budget: self.attempt_budget,
            wait_budget: self.wait_budget_seconds.map(seconds),
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DiagnoseArguments {
    #[serde(default)]
    #[schemars(description = OPERATION_ID)]
    pub(super) operation_id: Option<String>,
    #[serde(default)]
    #[schemars(description = OPERATION)]
    pub(super) operation: Option<String>,
    #[serde(default)]
    #[schemars(description = KEY)]
    pub(super) key: Option<String>,
    /// What the caller observed.
    #[serde(default)]
    pub(super) evidence: EvidenceArguments,
    /// What the caller may do; a plan beyond it is refused (PERMISSION_DENIED).
    #[serde(default)]
    pub(super) constraints: ConstraintArguments,
    /// What must be true at the end, in the caller's words (at most 1 KiB).
    #[serde(default)]
    pub(super) success_criterion: Option<String>,
    /// Who asks and why, in the caller's words (at most 1 KiB).
    #[serde(default)]
    pub(super) context: Option<String>,
}

impl DiagnoseArguments {
    pub(super) fn request(self) -> Result<DiagnoseRequest, ArgumentError> {
        Ok(DiagnoseRequest {
            target: Some(target(self.operation_id, self.operation, self.key)?.into()),
            tenant: String::new(),
            evidence: Some(self.evidence.evidence()?),
            constraints: Some(self.constraints.constraints()?),
            success_criterion: self.success_criterion.unwrap_or_default(),
            context: self.context.unwrap_or_default(),
        })
    }
}

/// What the evidence from the provider says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(super) enum ResolutionKind {
    /// The effect happened: store its result (result_text or result_base64).
    Succeeded,
    /// The effect did not happen and never will: store this failure
    /// (error_code, error_message).
    Failed,
    /// The effect did not happen: grant one more attempt, due now.
    NotApplied,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReconcileArguments {
    /// The operation, as lookup or list_unresolved gave it.
    pub(super) operation_id: String,
    /// The fence as lookup or list_unresolved gave it (a number, or the
    /// string the JSON shows): refused if the operation moved since.
    #[serde(deserialize_with = "fence")]
    #[schemars(schema_with = "fence_schema")]
    pub(super) expected_fence: u64,
    /// What the provider's evidence says.
    pub(super) resolution: ResolutionKind,
    /// SUCCEEDED: the result body as text (UTF-8).
    #[serde(default)]
    pub(super) result_text: Option<String>,
    /// SUCCEEDED: the result body as base64 (instead of result_text).
    #[serde(default)]
    pub(super) result_base64: Option<String>,
    /// SUCCEEDED: the result's content type (default application/json).
    #[serde(default)]
    pub(super) content_type: Option<String>,
    /// FAILED: the failure's code, e.g. card_declined.
    #[serde(default)]
    pub(super) error_code: Option<String>,
    /// FAILED: the failure's message (never a secret).
    #[serde(default)]
    pub(super) error_message: Option<String>,
    /// Must be true, or nothing is sent: set it only once the provider's
    /// evidence settles the outcome and whoever the agent acts for agreed.
    #[serde(default)]
    pub(super) confirm: bool,
}

fn fence<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText<'a> {
        Number(u64),
        Text(Cow<'a, str>),
    }
    match NumberOrText::deserialize(deserializer)? {
        NumberOrText::Number(fence) => Ok(fence),
        NumberOrText::Text(text) => text
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom("expected_fence: not a whole number")),
    }
}

fn fence_schema(_generator: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": ["integer", "string"],
        "minimum": 0,
        "pattern": "^[0-9]+$",
        "description": "The fence as lookup or list_unresolved gave it (a number, or the string the JSON shows): refused (ABORTED) if the operation moved since.",
    })
}

impl ReconcileArguments {
    /// The request, once confirmed; the resolution alone is checked first,
    /// so an unconfirmed call can say what it would have done.
    pub(super) fn resolution(&self) -> Result<Resolution, ArgumentError> {
        match self.resolution {
            ResolutionKind::Succeeded => {
                let body = match (&self.result_text, &self.result_base64) {
                    (Some(text), None) => text.as_bytes().to_vec(),
                    (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .map_err(|_| invalid("result_base64: not base64"))?,
                    _ => {
                        return Err(invalid(
                            "SUCCEEDED needs the result: exactly one of result_text, result_base64",
                        ));
                    }
                };
                Ok(Resolution::Succeeded(proto::Result {
                    body,
                    content_type: self
                        .content_type
                        .clone()
                        .unwrap_or_else(|| "application/json".to_owned()),
                    metadata: Default::default(),
                }))
            }
            ResolutionKind::Failed => match (&self.error_code, &self.error_message) {
                (Some(code), Some(message)) => Ok(Resolution::Failed(OperationError {
                    code: code.clone(),
                    message: message.clone(),
                    ..Default::default()
                })),
                _ => Err(invalid("FAILED needs error_code and error_message")),
            },
            ResolutionKind::NotApplied => Ok(Resolution::NotApplied(NotApplied {})),
        }
    }

    pub(super) fn request(&self, resolution: Resolution) -> ReconcileRequest {
        ReconcileRequest {
            operation_id: self.operation_id.clone(),
            expected_fence: self.expected_fence,
            resolution: Some(resolution),
            tenant: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn diagnose(arguments: Value) -> Result<DiagnoseRequest, ArgumentError> {
        serde_json::from_value::<DiagnoseArguments>(arguments)
            .map_err(|error| invalid(error.to_string()))?
            .request()
    }

    #[test]
    fn a_target_is_an_id_or_a_name_and_key_never_both_nor_half() {
        let target = |value: Value| {
            serde_json::from_value::<LookupArguments>(value)
                .expect("an object")
                .target()
        };
        assert!(matches!(
            target(json!({"operation_id": "op-1"})),
            Ok(Target::OperationId(id)) if id == "op-1"
        ));
        assert!(matches!(
            target(json!({"operation": "payments.charge", "key": "k"})),
            Ok(Target::Scope(scope)) if scope.operation == "payments.charge" && scope.key == "k"
        ));
        for refused in [
            json!({}),
            json!({"operation": "payments.charge"}),
            json!({"operation_id": "op-1", "operation": "payments.charge", "key": "k"}),
            json!({"operation_id": ""}),
        ] {
            assert!(target(refused.clone()).is_err(), "{refused}");
        }
    }

    #[test]
    fn an_unknown_argument_is_refused_not_ignored() {
        // A misspelt confirm or evidence field would otherwise be dropped
        // without a word, and the call would mean something else.
        assert!(
            serde_json::from_value::<ReconcileArguments>(json!({
                "operation_id": "op-1", "expected_fence": 1, "resolution": "NOT_APPLIED",
                "confirmed": true,
            }))
            .is_err()
        );
        assert!(diagnose(json!({"operation_id": "op-1", "evidence": {"note": "x"}})).is_err());
        assert!(
            diagnose(json!({"operation_id": "op-1", "symptom": "SYMPTOM_UNSPECIFIED"})).is_err()
        );
    }

    #[test]
    fn diagnose_arguments_become_the_request_field_by_field() {
        let request = diagnose(json!({
            "operation": "payments.charge",
            "key": "order-1",
            "evidence": {
                "symptom": "SYMPTOM_TIMEOUT_BEFORE_RESPONSE",
                "fingerprint_hex": "00ff".repeat(16),
                "new_key_for_retry": true,
                "provider_finding": "PROVIDER_FINDING_NO_EFFECT",
                "provider_looked_ago_seconds": 30,
                "observed_ago_seconds": 60,
                "notes": "the gateway reset the connection",
            },
            "constraints": {
                "authority": "AUTHORITY_READ_ONLY",
                "reversible_only": true,
                "attempt_budget": 0,
                "wait_budget_seconds": 120,
            },
            "success_criterion": "charged once",
            "context": "on-call agent",
        }))
        .expect("a request");
        let evidence = request.evidence.expect("evidence");
        assert_eq!(
            evidence.symptom,
            proto::Symptom::TimeoutBeforeResponse as i32
        );
        assert_eq!(
            evidence.request_identity,
            Some(RequestIdentity::Fingerprint([0x00, 0xff].repeat(16)))
        );
        assert!(evidence.new_key_for_retry);
        assert_eq!(
            evidence.provider_finding,
            proto::ProviderFinding::NoEffect as i32
        );
        assert_eq!(evidence.provider_looked_ago.map(|d| d.seconds), Some(30));
        assert_eq!(evidence.observed_ago.map(|d| d.seconds), Some(60));
        assert_eq!(evidence.notes, "the gateway reset the connection");
        let constraints = request.constraints.expect("constraints");
        assert_eq!(constraints.authority, proto::Authority::ReadOnly as i32);
        assert!(constraints.reversible_only);
        assert_eq!(constraints.attempt_budget, Some(0));
        assert_eq!(constraints.wait_budget.map(|d| d.seconds), Some(120));
        assert_eq!(request.success_criterion, "charged once");
        assert_eq!(request.context, "on-call agent");
        assert!(matches!(
            request.target,
            Some(proto::diagnose_request::Target::Scope(scope)) if scope.key == "order-1"
        ));
    }

    #[test]
    fn diagnose_without_evidence_sends_the_zero_values() {
        let request = diagnose(json!({"operation_id": "op-1"})).expect("a request");
        let evidence = request.evidence.expect("evidence");
        assert_eq!(evidence.symptom, 0);
        assert_eq!(evidence.request_identity, None);
        assert_eq!(evidence.observed_ago, None);
        assert_eq!(
            request.constraints.expect("constraints").attempt_budget,
            None
        );
    }

    #[test]
    fn diagnose_refuses_what_names_no_request() {
        for refused in [
            json!({"operation_id": "op-1", "evidence": {"symptom": "TIMEOUT"}}),
            json!({"operation_id": "op-1", "evidence": {"fingerprint_hex": "abc"}}),
            json!({"operation_id": "op-1", "evidence": {"fingerprint_hex": "zz"}}),
            json!({"operation_id": "op-1", "evidence": {"bytes_payload_base64": "%%"}}),
            json!({"operation_id": "op-1", "evidence": {"json_payload": "{}", "fingerprint_hex": "00"}}),
            json!({"operation_id": "op-1", "constraints": {"authority": "AUTHORITY_ALL"}}),
        ] {
            assert!(diagnose(refused.clone()).is_err(), "{refused}");
        }
    }

    #[test]
    fn every_proto_enum_value_is_in_its_schema() {
        let schema = symptom_schema(&mut SchemaGenerator::default());
        let names = schema
            .get("enum")
            .and_then(Value::as_array)
            .expect("an enum");
        assert_eq!(names.first(), Some(&json!("SYMPTOM_UNSPECIFIED")));
        assert!(names.contains(&json!("SYMPTOM_STORE_GROWING")));
        assert!(names.len() >= 8);
        let schema = authority_schema(&mut SchemaGenerator::default());
        let names = schema
            .get("enum")
            .and_then(Value::as_array)
            .expect("an enum");
        assert_eq!(names.len(), 4);
    }

    fn reconcile(arguments: Value) -> ReconcileArguments {
        serde_json::from_value(arguments).expect("arguments")
    }

    #[test]
    fn reconcile_takes_the_fence_as_a_number_or_as_the_string_json_shows() {
        let by_number = reconcile(json!({
            "operation_id": "op-1", "expected_fence": 7, "resolution": "NOT_APPLIED",
        }));
        let by_text = reconcile(json!({
            "operation_id": "op-1", "expected_fence": "7", "resolution": "NOT_APPLIED",
        }));
        assert_eq!((by_number.expected_fence, by_text.expected_fence), (7, 7));
        assert!(!by_number.confirm, "confirm defaults to false");
        assert!(
            serde_json::from_value::<ReconcileArguments>(json!({
                "operation_id": "op-1", "expected_fence": "seven", "resolution": "NOT_APPLIED",
            }))
            .is_err()
        );
    }

    #[test]
    fn each_resolution_needs_its_fields() {
        let succeeded = reconcile(json!({
            "operation_id": "op-1", "expected_fence": 2, "resolution": "SUCCEEDED",
            "result_text": "{\"charge\":\"ch_1\"}",
        }));
        assert_eq!(
            succeeded.resolution(),
            Ok(Resolution::Succeeded(proto::Result {
                body: b"{\"charge\":\"ch_1\"}".to_vec(),
                content_type: "application/json".to_owned(),
                metadata: Default::default(),
            }))
        );
        let by_base64 = reconcile(json!({
            "operation_id": "op-1", "expected_fence": 2, "resolution": "SUCCEEDED",
            "result_base64": "AAE=", "content_type": "application/octet-stream",
        }));
        assert!(matches!(
            by_base64.resolution(),
            Ok(Resolution::Succeeded(result)) if result.body == [0, 1]
        ));
        let failed = reconcile(json!({
            "operation_id": "op-1", "expected_fence": 2, "resolution": "FAILED",
            "error_code": "card_declined", "error_message": "declined at the provider",
        }));
        assert!(matches!(
            failed.resolution(),
            Ok(Resolution::Failed(error)) if error.code == "card_declined"
        ));
        for refused in [
            json!({"operation_id": "op-1", "expected_fence": 2, "resolution": "SUCCEEDED"}),
            json!({"operation_id": "op-1", "expected_fence": 2, "resolution": "SUCCEEDED",
                   "result_text": "a", "result_base64": "YQ=="}),
            json!({"operation_id": "op-1", "expected_fence": 2, "resolution": "FAILED",
                   "error_code": "card_declined"}),
        ] {
            assert!(
                reconcile(refused.clone()).resolution().is_err(),
                "{refused}"
            );
        }
    }
}

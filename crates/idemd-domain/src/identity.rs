//! The fingerprint a Claim's request identity names: the caller's own, or
//! one computed here from the payload (see `fingerprint`), which is measured
//! against its bound before anything reads it.

use super::error::Violations;
use super::fingerprint;
use super::limits::Limits;
use super::model::Fingerprint;
use super::requested::RequestIdentity;

impl Limits {
    /// The fingerprint the identity names; None (and a violation) when it
    /// names none or an unusable one. Each identity's violation names its own
    /// field. Payloads are measured before anything reads them.
    pub(super) fn fingerprint_of(
        &self,
        identity: Option<RequestIdentity>,
        violations: &mut Violations,
    ) -> Option<Fingerprint> {
        let payload_too_large = |field: &str, size: usize, violations: &mut Violations| {
            let too_large = size > self.max_payload_bytes;
            if too_large {
                violations.add(
                    field,
                    format!(
                        "must be at most {} bytes (or send a fingerprint instead)",
                        self.max_payload_bytes
                    ),
                );
            }
            too_large
        };
        match identity {
            None => {
                violations.add(
                    "request_identity",
                    "one of fingerprint, json_payload or bytes_payload is required",
                );
                None
            }
            Some(RequestIdentity::Fingerprint(bytes)) => fingerprint::from_client_bytes(&bytes)
                .map_err(|error| violations.add("fingerprint", error.to_string()))
                .ok(),
            Some(RequestIdentity::JsonPayload(document)) => {
                if payload_too_large("json_payload", document.len(), violations) {
                    return None;
                }
                fingerprint::of_json(&document)
                    .map_err(|error| violations.add("json_payload", format!("{error} (RFC 7493)")))
                    .ok()
            }
            Some(RequestIdentity::BytesPayload(bytes)) => {
                if payload_too_large("bytes_payload", bytes.len(), violations) {
                    return None;
                }
                Some(fingerprint::of_bytes(&bytes))
            }
        }
    }
}

impl Limits {
    /// The fingerprints a Diagnose request could have had as a Claim: a
    /// client's own, or a payload's under each mode it reads in (JSON text
    /// is tried as json and as bytes; bytes as bytes, and as json when they
    /// are JSON), so that a comparison can also tell which mode the stored
    /// fingerprint was made with. Measured and checked as a Claim's are.
    pub fn diagnose_candidates(
        &self,
        identity: Option<RequestIdentity>,
        violations: &mut Violations,
    ) -> crate::diagnose::Candidates {
        use crate::diagnose::Mode;
        let Some(identity) = identity else {
            return Vec::new();
        };
        let mut candidates = Vec::new();
        match &identity {
            RequestIdentity::Fingerprint(_) => {}
            RequestIdentity::JsonPayload(document) => {
                if document.len() <= self.max_payload_bytes {
                    candidates.push((Mode::Bytes, fingerprint::of_bytes(document.as_bytes())));
                }
            }
            RequestIdentity::BytesPayload(bytes) => {
                if bytes.len() <= self.max_payload_bytes
                    && let Ok(document) = std::str::from_utf8(bytes)
                    && let Ok(as_json) = fingerprint::of_json(document)
                {
                    candidates.push((Mode::Json, as_json));
                }
            }
        }
        let mode = match identity {
            RequestIdentity::Fingerprint(_) => Mode::Client,
            RequestIdentity::JsonPayload(_) => Mode::Json,
            RequestIdentity::BytesPayload(_) => Mode::Bytes,
        };
        if let Some(primary) = self.fingerprint_of(Some(identity), violations) {
            candidates.insert(0, (mode, primary));
        }
        candidates
    }
}

/// At most this many previous fingerprints ride on one Claim: a migration
/// window spans a deployment or two, not a history of normalisations.
pub const MAX_PREVIOUS_FINGERPRINTS: usize = 4;

impl Limits {
    /// The fingerprints of the request under earlier normalisations, each
    /// checked as a client's fingerprint is; a violation names its index.
    pub(super) fn previous_fingerprints(
        &self,
        sent: Vec<Vec<u8>>,
        violations: &mut Violations,
    ) -> Vec<Fingerprint> {
        if sent.len() > MAX_PREVIOUS_FINGERPRINTS {
            violations.add(
                "previous_fingerprints",
                format!("must hold at most {MAX_PREVIOUS_FINGERPRINTS} fingerprints"),
            );
            return Vec::new();
        }
        sent.iter()
            .enumerate()
            .filter_map(|(index, bytes)| {
                fingerprint::from_client_bytes(bytes)
                    .map_err(|error| {
                        violations.add(format!("previous_fingerprints[{index}]"), error.to_string())
                    })
                    .ok()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admit::testing::{claim_requested, refused_fields, violations_of};
    use crate::error::FieldViolation;
    use crate::requested::ClaimRequested;

    #[test]
    fn payloads_are_bounded_before_they_are_parsed() {
        let limits = Limits {
            max_payload_bytes: 16,
            ..Limits::default()
        };
        let with = |identity| ClaimRequested {
            identity: Some(identity),
            ..claim_requested()
        };
        // 16 bytes exactly: a valid document at the bound is fingerprinted.
        let at_the_bound = r#"{"amount":12345}"#;
        assert_eq!(at_the_bound.len(), 16);
        let (command, _) = limits
            .claim(
                with(RequestIdentity::JsonPayload(at_the_bound.into())),
                Violations::default(),
            )
            .expect("at the bound");
        assert_eq!(Ok(command.fingerprint), fingerprint::of_json(at_the_bound));
        // One byte more, and not even JSON: refused for its size alone, so
        // the parser never saw it.
        assert_eq!(
            violations_of(limits.claim(
                with(RequestIdentity::JsonPayload("{".repeat(17))),
                Violations::default()
            )),
            [FieldViolation::new(
                "json_payload",
                "must be at most 16 bytes (or send a fingerprint instead)"
            )]
        );
        assert_eq!(
            refused_fields(limits.claim(
                with(RequestIdentity::BytesPayload(vec![0; 17])),
                Violations::default()
            )),
            ["bytes_payload"]
        );
        limits
            .claim(
                with(RequestIdentity::BytesPayload(vec![0; 16])),
                Violations::default(),
            )
            .expect("at the bound");
        // A client fingerprint is the way to claim for a large request.
        limits
            .claim(
                with(RequestIdentity::Fingerprint(vec![7; 32])),
                Violations::default(),
            )
            .expect("fingerprints are 32 bytes whatever the request's size");
    }
}

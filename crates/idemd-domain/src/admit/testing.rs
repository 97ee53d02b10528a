//! What the command builders' tests share: a valid request to vary, and
//! the fields a refusal names.

use uuid::Uuid;

use crate::command::FailDisposition;
use crate::error::{Error, FieldViolation, Result};
use crate::model::{OperationId, Scope};
use crate::requested::{ClaimRequested, FailRequested, RequestIdentity};

pub(crate) fn claim_requested() -> ClaimRequested {
    ClaimRequested {
        scope: Some(Scope {
            operation: "payments.charge".into(),
            key: "k".into(),
        }),
        identity: Some(RequestIdentity::BytesPayload(b"payload".to_vec())),
        claim_token: Vec::new(),
        lease: None,
        max_attempt_duration: None,
        max_attempts: 0,
        retention: None,
        operation_deadline: None,
        wait: None,
        previous_fingerprints: Vec::new(),
    }
}

pub(crate) fn fail_requested(disposition: FailDisposition) -> FailRequested {
    FailRequested {
        operation_id: OperationId(Uuid::nil()),
        fence: 1,
        disposition: Some(disposition),
        error: None,
        retry_after: None,
    }
}

pub(crate) fn refused_fields<T: std::fmt::Debug>(result: Result<T>) -> Vec<String> {
    match result {
        Err(Error::InvalidArgument(violations)) => violations
            .into_iter()
            .map(|violation| violation.field)
            .collect(),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

pub(crate) fn violations_of<T: std::fmt::Debug>(result: Result<T>) -> Vec<FieldViolation> {
    match result {
        Err(Error::InvalidArgument(violations)) => violations,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

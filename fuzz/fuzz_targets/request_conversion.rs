//! Arbitrary bytes decoded as each request message (as tonic would hand them
//! to a handler), converted by `grpc::request` and bounded by `Limits`, and
//! every refusal turned into a `Status`. Never a panic; what passes lies
//! within the bounds; what is refused carries an ErrorInfo and names fields.

#![no_main]

use chrono::TimeDelta;
use idemd::auth::{Principal, Scope, Scopes};
use idemd::domain::policy::{OperationPattern, OperationPolicy, Policies};
use idemd::domain::{Error, Limits, OperationFilter, Resolution, TenantId, TenantSelection};
use idemd::grpc::request;
use idemd::proto;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tonic_types::StatusExt;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, message)) = data.split_first() else {
        return;
    };
    // Small bounds too, so that inputs of a few bytes reach both sides of each.
    let limits = if selector & 0x80 == 0 {
        Limits::default()
    } else {
        Limits {
            max_payload_bytes: 8,
            max_key_bytes: 4,
            max_metadata_entry_bytes: 6,
            default_page_size: 2,
            max_page_size: 3,
            max_wait: TimeDelta::milliseconds(5),
            ..Limits::default()
        }
    };
    let refusal = match selector % 9 {
        0 => claim(message, &limits),
        1 => decode::<proto::RenewRequest>(message).and_then(|request| {
            let command = request::renew_command(request, &limits);
            if let Ok(command) = &command {
                assert!(command.fence > 0);
                if let Some(lease) = command.lease {
                    assert!(limits.min_lease <= lease && lease <= limits.max_lease);
                }
            }
            command.err()
        }),
        2 => decode::<proto::CompleteRequest>(message).and_then(|request| {
            let command = request::complete_command(request, &limits);
            if let Ok(command) = &command {
                assert!(command.result.body.len() <= limits.max_result_bytes);
                assert_metadata_within(&command.result.metadata, &limits);
            }
            command.err()
        }),
        3 => decode::<proto::FailRequest>(message).and_then(|request| {
            let command = request::fail_command(request, &limits);
            if let Ok(command) = &command {
                assert!(TimeDelta::zero() <= command.retry_after);
                assert!(command.retry_after <= limits.max_retry_after);
                assert!(command.error.message.len() <= limits.max_error_message_bytes);
                assert_metadata_within(&command.error.metadata, &limits);
            }
            command.err()
        }),
        4 => decode::<proto::ReconcileRequest>(message).and_then(|request| {
            let command = request::reconcile_command(request, &limits);
            if let Ok(command) = &command {
                assert!(command.expected_fence > 0);
                if let Resolution::Succeeded(result) = &command.resolution {
                    assert_metadata_within(&result.metadata, &limits);
                }
            }
            command.err()
        }),
        5 => decode::<proto::LookupRequest>(message)
            .and_then(|request| request::lookup_request(request, &limits).err()),
        6 => decode::<proto::ListUnresolvedRequest>(message).and_then(|request| {
            let query = request::unresolved_query(request, &limits);
            if let Ok(query) = &query {
                assert!(0 < query.limit && query.limit <= limits.max_page_size);
            }
            query.err()
        }),
        7 => decode::<proto::ListOperationsRequest>(message).and_then(|request| {
            // An admin credential on one bit, a reconciler's otherwise.
            let scopes = if selector & 0x40 == 0 {
                Scopes::of(&[Scope::Reconcile])
            } else {
                Scopes::of(&[Scope::Admin])
            };
            let principal = Principal::token(TenantId(1), scopes, "fuzz");
            let query = request::list_operations_query(request, &limits, &principal);
            if let Ok(query) = &query {
                assert!(0 < query.limit && query.limit <= limits.max_page_size);
                // The canonical text reads back to the same filter.
                let text = query.filter.to_string();
                assert_eq!(OperationFilter::parse(&text).as_ref(), Ok(&query.filter));
                if !scopes.contains(Scope::Admin) {
                    assert_eq!(query.tenants, TenantSelection::Own(TenantId(1)));
                }
            }
            query.err()
        }),
        _ => decode::<proto::ForgetRequest>(message).and_then(|request| {
            // Naming a tenant: only an admin may (the Forget handler's
            // resolution, shared with Lookup, Reconcile and ListOperations).
            let scopes = if selector & 0x40 == 0 {
                Scopes::of(&[Scope::Reconcile])
            } else {
                Scopes::of(&[Scope::Admin])
            };
            let principal = Principal::token(TenantId(1), scopes, "fuzz");
            let selection = request::tenant_selection(&principal, Some(&request.tenant));
            if let Ok(selection) = &selection
                && !scopes.contains(Scope::Admin)
            {
                assert_eq!(selection, &TenantSelection::Own(TenantId(1)));
            }
            let command = request::forget_command(request, &limits);
            if let Ok(command) = &command {
                assert!(command.expected_fence > 0);
                assert!(!command.reason.is_empty());
                assert!(command.reason.len() <= limits.max_forget_reason_bytes);
                assert!(!command.reason.chars().any(char::is_control));
            }
            selection.err().or(command.err())
        }),
    };
    if let Some(error) = refusal {
        assert_answered_with_error_info(error);
    }
});

fn decode<M: Message + Default>(message: &[u8]) -> Option<M> {
    M::decode(message).ok()
}

fn claim(message: &[u8], limits: &Limits) -> Option<Error> {
    use proto::claim_request::RequestIdentity;
    let request = decode::<proto::ClaimRequest>(message)?;
    let payload_bytes = match &request.request_identity {
        Some(RequestIdentity::JsonPayload(document)) => Some(document.len()),
        Some(RequestIdentity::BytesPayload(bytes)) => Some(bytes.len()),
        _ => None,
    };
    // An operation policy narrows `payments.*`: a Claim of it never gets
    // past the policy's ceilings, and every other bound holds as before.
    let mut payments = OperationPolicy::new(OperationPattern::Prefix("payments.".into()));
    payments.lease.max = Some(TimeDelta::minutes(1));
    payments.max_attempts.max = Some(3);
    let policies = Policies::new(vec![payments], limits).expect("a valid policy");
    match request::claim_command(request, limits, &policies) {
        Ok((command, wait)) => {
            if command.scope.operation.starts_with("payments.") {
                assert!(command.lease <= TimeDelta::minutes(1));
                assert!(command.max_attempts <= 3);
            }
            assert!(payload_bytes.is_none_or(|bytes| bytes <= limits.max_payload_bytes));
            assert!(TimeDelta::zero() <= wait && wait <= limits.max_wait);
            assert!(limits.min_lease <= command.lease && command.lease <= limits.max_lease);
            assert!(command.max_attempt_duration <= limits.max_attempt_duration);
            assert!(0 < command.max_attempts && command.max_attempts <= limits.max_attempts);
            assert!(!command.scope.key.is_empty());
            assert!(command.scope.key.len() <= limits.max_key_bytes);
            assert!(command.retention <= limits.max_retention);
            None
        }
        Err(error) => {
            if payload_bytes.is_some_and(|bytes| bytes > limits.max_payload_bytes) {
                let Error::InvalidArgument(violations) = &error else {
                    panic!("an oversized payload is INVALID_ARGUMENT, not {error:?}");
                };
                assert!(violations.iter().any(|violation| {
                    violation.field == "json_payload" || violation.field == "bytes_payload"
                }));
            }
            Some(error)
        }
    }
}

fn assert_metadata_within(metadata: &idemd::domain::Metadata, limits: &Limits) {
    assert!(metadata.len() <= limits.max_metadata_entries);
    assert!(
        metadata
            .iter()
            .all(|(name, value)| name.len() + value.len() <= limits.max_metadata_entry_bytes)
    );
}

fn assert_answered_with_error_info(error: Error) {
    let invalid_argument = matches!(error, Error::InvalidArgument(_));
    let status: tonic::Status = idemd::grpc::status::to_status(error);
    let info = status
        .get_details_error_info()
        .expect("every refusal carries an ErrorInfo");
    assert_eq!(info.domain, "idem.v1");
    if invalid_argument {
        assert_eq!(info.reason, "INVALID_REQUEST");
        let violations = status
            .get_details_bad_request()
            .expect("INVALID_ARGUMENT carries BadRequest")
            .field_violations;
        assert!(!violations.is_empty());
        assert!(
            violations
                .iter()
                .all(|violation| !violation.field.is_empty())
        );
    }
}

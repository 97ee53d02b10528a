//! Bounds and values: every value stored and read back as it was given.

use chrono::{DateTime, TimeDelta};
use idemd::domain::*;

use super::fixture::*;
use crate::harness::*;

async fn values_at_their_bounds_are_stored_and_read_back_exactly(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    // 255 bytes of key, multibyte characters included; 128 characters of operation.
    let key = format!("{}x", "é".repeat(127));
    assert_eq!(key.len(), 255);
    let operation = format!("a.{}", "b/-_".repeat(32))
        .chars()
        .take(128)
        .collect::<String>();
    assert_eq!(operation.chars().count(), 128);
    let command = ClaimCommand {
        scope: Scope {
            operation,
            key: key.clone(),
        },
        fingerprint: Fingerprint([0xff; 32]),
        claim_token: (0..64).map(|byte| (byte * 4) as u8).collect(),
        lease: TimeDelta::hours(1),
        max_attempt_duration: TimeDelta::hours(24),
        max_attempts: 100,
        retention: TimeDelta::days(30),
        operation_deadline: Some(TimeDelta::days(30)),
        on_failed: idemd::domain::OnFailed::NewAttempt,
        clock_margin: TimeDelta::zero(),
        previous_fingerprints: Vec::new(),
        held: None,
    };
    let owner = acquired(fixture.claim(&command).await);
    assert_eq!(
        owner.on_failed,
        idemd::domain::OnFailed::NewAttempt,
        "stored as given"
    );
    assert_eq!(
        fixture.find(owner.operation_id).await.expect("exists").0,
        owner
    );

    // Keys are compared byte for byte: case, spacing and normalisation matter.
    for variant in [
        key.to_uppercase().chars().take(100).collect::<String>(),
        format!("{key} ").chars().skip(2).collect(),
        format!("{}x", "e\u{301}".repeat(50)),
    ] {
        let distinct = ClaimCommand {
            scope: Scope {
                key: variant.clone(),
                ..command.scope.clone()
            },
            ..command.clone()
        };
        let (answer, _) = fixture.claim(&distinct).await;
        assert_eq!(answer, Ok(ClaimAnswer::Acquired), "{variant:?}");
    }

    let result = SuccessResult {
        body: (0..1024 * 1024).map(|index| (index % 251) as u8).collect(),
        content_type: "c".repeat(255),
        metadata: (0..16)
            .map(|index| (format!("{index:02}{}", "k".repeat(126)), "v".repeat(128)))
            .collect(),
    };
    let completed = fixture.complete(&owner, result.clone()).await;
    assert_eq!(completed.answer, Ok(Answer::Written));
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert_eq!(stored.outcome, Some(Outcome::Succeeded(result)));

    let failing = acquired(
        fixture
            .claim(&ClaimCommand {
                scope: Scope {
                    operation: "payments.charge".into(),
                    key: "failing".into(),
                },
                ..command.clone()
            })
            .await,
    );
    let error = ErrorReport {
        code: "e".repeat(255),
        message: "ü".repeat(2048),
        metadata: Metadata::from([("quote".into(), "\"'\\".into())]),
    };
    let failure = FailCommand {
        operation_id: failing.operation_id,
        fence: failing.fence,
        disposition: FailDisposition::Terminal,
        error: error.clone(),
        retry_after: TimeDelta::zero(),
        clock_margin: TimeDelta::zero(),
    };
    fixture.fail_with(&failure).await;
    let stored = fixture.find(failing.operation_id).await.expect("exists").0;
    assert_eq!(
        stored.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::Terminal,
            error
        })
    );
}

async fn timestamps_keep_microseconds(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let owner = acquired(fixture.claim(&command("k", 30_000)).await);
    let precise = DateTime::parse_from_rfc3339("2031-02-03T04:05:06.123456Z")
        .expect("valid")
        .to_utc();
    let with_nanos = precise + TimeDelta::nanoseconds(789);
    // A write no decision makes, to see what the store keeps of each value.
    let applied = fixture
        .transition(owner.operation_id, |record, _now| Decision {
            effects: Effects {
                update: Some(Update {
                    next: OperationRecord {
                        retain_until: Some(precise),
                        retry_at: Some(with_nanos),
                        ..record.clone()
                    },
                    takes_new_fence: false,
                }),
                ..Effects::default()
            },
            answer: Ok(Answer::Written),
        })
        .await;
    assert!(applied.record_changed);
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert_eq!(stored.retain_until, Some(precise));
    assert_eq!(
        stored.retry_at,
        Some(precise),
        "below a microsecond is dropped"
    );
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED"],
        "no history was asked for"
    );
}

store_tests!(
    values_at_their_bounds_are_stored_and_read_back_exactly,
    timestamps_keep_microseconds,
);

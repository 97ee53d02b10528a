//! What an owned attempt records: its decline (Fail NOT_STARTED), the
//! effect's disposition (Complete, Fail), and, told LEASE_LOST, what another
//! owner stored.

use std::time::Duration;

use super::attempt::{Owned, Run, Step};
use super::{
    Disposition, Execution, Outcome, PreviousAttempt, Source, proto_duration, std_duration,
};
use crate::error::Error;
use crate::error::UnknownBecause;
use crate::proto::{self, OperationState};

impl Run<'_> {
    /// The effect is not started (too little lease or attempt left, or an
    /// earlier attempt's doubt outlasts this one): Fail NOT_STARTED, which
    /// hands the operation on as it was before this attempt (released, or
    /// still in the doubt it took over, with that doubt's deadline), and
    /// claim again.
    pub(super) async fn decline(
        &mut self,
        owned: &Owned,
        inherited: Option<&PreviousAttempt>,
    ) -> Result<Step, Error> {
        self.decline_saying(
            owned,
            inherited,
            "the effect was not started: too little of the lease or attempt was left, or an \
             earlier attempt may still be running",
        )
        .await
    }

    /// A takeover that cannot find out whether the earlier attempt took
    /// effect (no lookup and no provider deduplication declared, or a lookup
    /// that could not tell): decline, keeping the earlier attempt's doubt and
    /// deadline on the server, and say so to the caller instead of claiming
    /// again, which would meet the same doubt.
    pub(super) async fn decline_in_doubt(
        &mut self,
        owned: &Owned,
        previous: &PreviousAttempt,
        because: UnknownBecause,
    ) -> Result<Step, Error> {
        let message = match because {
            UnknownBecause::LookupInconclusive => {
                "the effect was not started: the lookup could not tell whether an earlier \
                 attempt took effect"
            }
            _ => {
                "the effect was not started: an earlier attempt may have taken effect and this \
                 call cannot check it (no lookup, no provider deduplication declared)"
            }
        };
        match self.decline_saying(owned, Some(previous), message).await? {
            // The server ended the operation meanwhile: its stored outcome.
            done @ Step::Done(_) => Ok(done),
            Step::Reclaim(_) => Err(Error::OutcomeUnknown {
                operation_id: owned.ownership.operation_id.clone(),
                attempt: owned.ownership.attempt,
                because,
            }),
        }
    }

    pub(super) async fn decline_saying(
        &mut self,
        owned: &Owned,
        inherited: Option<&PreviousAttempt>,
        message: &str,
    ) -> Result<Step, Error> {
        // This attempt ran nothing: a later takeover of it by this call is
        // in doubt only as long as the attempt it took over was.
        if let Some(previous) = inherited {
            self.own_deadlines
                .insert(owned.ownership.fence, previous.attempt_deadline);
        }
        let request = proto::FailRequest {
            operation_id: owned.ownership.operation_id.clone(),
            fence: owned.ownership.fence,
            disposition: proto::FailDisposition::NotStarted.into(),
            error: Some(proto::OperationError {
                code: "not_started".into(),
                message: message.into(),
                ..Default::default()
            }),
            retry_after: None,
        };
        match self.client.fail_until(request, None).await {
            Ok(failed) if failed.state() == OperationState::Failed => {
                // The budget or the operation deadline is spent: the server
                // ended it; replay what it stored.
                self.stored(owned, Source::Replayed).await.map(Step::Done)
            }
            Ok(failed) => Ok(Step::Reclaim(std_duration(failed.retry_after))),
            Err(Error::LeaseLost { .. }) => Ok(Step::Reclaim(Duration::ZERO)),
            Err(error) => Err(error),
        }
    }

    /// Records the effect's disposition.
    pub(super) async fn report(
        &self,
        owned: &Owned,
        disposition: Disposition,
        source: Source,
    ) -> Result<Step, Error> {
        let ownership = &owned.ownership;
        let done = |outcome| {
            Step::Done(Execution {
                operation_id: ownership.operation_id.clone(),
                outcome,
                source,
                attempt: ownership.attempt,
            })
        };
        let fail =
            |disposition: proto::FailDisposition, error: &proto::OperationError, retry_after| {
                proto::FailRequest {
                    operation_id: ownership.operation_id.clone(),
                    fence: ownership.fence,
                    disposition: disposition.into(),
                    error: Some(error.clone()),
                    retry_after,
                }
            };
        let written = match disposition {
            Disposition::Success(result) => {
                let request = proto::CompleteRequest {
                    operation_id: ownership.operation_id.clone(),
                    fence: ownership.fence,
                    result: Some(result.clone()),
                };
                self.client
                    .complete_until(request, None)
                    .await
                    .map(|_| done(Outcome::Succeeded(result)))
            }
            Disposition::Terminal(mut error) => {
                let request = fail(proto::FailDisposition::Terminal, &error, None);
                self.client.fail_until(request, None).await.map(|_| {
                    error.set_reason(proto::FailureReason::Terminal);
                    done(Outcome::Failed(error))
                })
            }
            Disposition::Retryable(mut error, retry_after) => {
                let request = fail(
                    proto::FailDisposition::Retryable,
                    &error,
                    proto_duration(retry_after),
                );
                self.client.fail_until(request, None).await.map(|failed| {
                    if failed.state() == OperationState::Failed {
                        error.set_reason(failed.reason());
                        done(Outcome::Failed(error))
                    } else {
                        Step::Reclaim(std_duration(failed.retry_after))
                    }
                })
            }
            Disposition::Unknown(error) => {
                let request = fail(proto::FailDisposition::Unknown, &error, None);
                let unknown = || Error::OutcomeUnknown {
                    operation_id: ownership.operation_id.clone(),
                    attempt: ownership.attempt,
                    because: UnknownBecause::EffectUnknown,
                };
                match self.client.fail_until(request, None).await {
                    Ok(_) => Err(unknown()),
                    // Refused as too late, the attempt is just as unknown: the
                    // server hands the next owner a takeover either way.
                    Err(Error::FailedPrecondition { reason, .. })
                        if reason == "ATTEMPT_DEADLINE_PASSED" =>
                    {
                        Err(unknown())
                    }
                    Err(error) => Err(error),
                }
            }
        };
        match written {
            Err(refusal @ Error::LeaseLost { .. }) => self.superseded(owned, refusal).await,
            written => written,
        }
    }

    /// Told LEASE_LOST: look the operation up and answer with what is stored;
    /// never run the effect again.
    pub(super) async fn superseded(&self, owned: &Owned, refusal: Error) -> Result<Step, Error> {
        match self.stored(owned, Source::Superseded).await {
            Ok(execution) => Ok(Step::Done(execution)),
            Err(Error::InvalidResponse(_)) => Err(refusal),
            Err(error) => Err(error),
        }
    }

    /// The operation's stored outcome; `InvalidResponse` if it has none yet.
    pub(super) async fn stored(&self, owned: &Owned, source: Source) -> Result<Execution, Error> {
        let operation = self
            .client
            .lookup_operation(&owned.ownership.operation_id)
            .await?;
        let outcome = match operation.state() {
            OperationState::Succeeded => Outcome::Succeeded(operation.result.unwrap_or_default()),
            OperationState::Failed => Outcome::Failed(operation.error.unwrap_or_default()),
            state => {
                return Err(Error::InvalidResponse(format!(
                    "the operation is {state:?}, not ended"
                )));
            }
        };
        Ok(Execution {
            operation_id: operation.operation_id,
            outcome,
            source,
            attempt: operation.attempt,
        })
    }
}

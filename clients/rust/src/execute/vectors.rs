//! The shared protocol vectors (testdata/protocol/vectors.json, described in
//! its README) driving this client's protocol core ([`Protocol`]) without a
//! server, as the other clients' runners do.
//!
//! The world of a scenario is scripted: each step the core takes (a send,
//! the effect, a provider lookup) must be the vector's next step, and is
//! answered as the vector says, the clock moving only by what the vector
//! says each step takes, by the pauses the core asks for and by the re-send
//! delays. Sends go through the client's own re-send decisions
//! ([`RetryPolicy::resend_after`], the default policy, no jitter), and
//! scripted errors through its own decoding ([`Error::from_status`]).
//! Background renewals run while a guarded step (the effect, a provider
//! lookup, a pause between lookups) takes its time.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use prost::Message;
use serde_json::Value;
use tokio::time::Instant;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use super::protocol::{Answer, Protocol, Step};
use super::{
    Disposition, EffectContext, Execution, Operation, Outcome, Payload, Source, proto_duration,
};
use crate::error::{ERROR_DOMAIN, Error, UnknownBecause};
use crate::proto::{self, claim_response};
use crate::retry::{Jitter, RetryPolicy};

/// Computed values (a `wait`) are compared within a microsecond.
const TOLERANCE: Duration = Duration::from_micros(1);

type Checked<T> = Result<T, String>;

fn seconds(value: &Value) -> Checked<Duration> {
    let seconds = value
        .as_f64()
        .ok_or_else(|| format!("not a number of seconds: {value}"))?;
    Duration::try_from_secs_f64(seconds).map_err(|error| format!("{value}: {error}"))
}

fn field<'v>(value: &'v Value, name: &str) -> Checked<&'v Value> {
    value
        .get(name)
        .ok_or_else(|| format!("no {name:?} in {value}"))
}

fn text(value: &Value, name: &str) -> Checked<String> {
    field(value, name)?
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{name:?} is not a string in {value}"))
}

fn number(value: &Value, name: &str) -> Checked<u64> {
    field(value, name)?
        .as_u64()
        .ok_or_else(|| format!("{name:?} is not a number in {value}"))
}

fn small(value: &Value, name: &str) -> Checked<u32> {
    u32::try_from(number(value, name)?).map_err(|error| error.to_string())
}

fn close(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) <= TOLERANCE
}

/// A scripted error, as a status the client decodes.
fn scripted_error(name: &str, retry_after: Option<Duration>) -> Checked<Error> {
    let (code, reason) = match name {
        "UNAVAILABLE" => (Code::Unavailable, None),
        "LOST_REPLY" => (Code::DeadlineExceeded, None),
        "LEASE_LOST" => (Code::Aborted, Some(name)),
        "ATTEMPT_DEADLINE_PASSED"
        | "STATE_FORBIDS"
        | "IDEMPOTENCY_KEY_REUSED"
        | "RESULT_EXPIRED" => (Code::FailedPrecondition, Some(name)),
        "INVALID_REQUEST" => (Code::InvalidArgument, Some(name)),
        other => return Err(format!("an error the runner does not know: {other}")),
    };
    let mut details = match reason {
        Some(reason) => ErrorDetails::with_error_info(
            reason,
            ERROR_DOMAIN,
            HashMap::from([("operation_id".to_owned(), "op-1".to_owned())]),
        ),
        None => ErrorDetails::new(),
    };
    if retry_after.is_some() {
        details.set_retry_info(retry_after);
    }
    let status = Status::with_error_details(code, format!("scripted {name}"), details);
    Ok(Error::from_status(&status))
}

fn ownership(fields: &Value) -> Checked<proto::Ownership> {
    let attempt = small(fields, "attempt")?;
    Ok(proto::Ownership {
        operation_id: "op-1".into(),
        fence: 10 + u64::from(attempt),
        attempt,
        max_attempts: 5,
        lease: proto_duration(seconds(field(fields, "lease")?)?),
        attempt_deadline: proto_duration(seconds(field(fields, "attempt_deadline")?)?),
    })
}

fn claim_response(answer: &Value) -> Checked<proto::ClaimResponse> {
    let (kind, fields) = answer
        .as_object()
        .and_then(|answer| answer.iter().next())
        .ok_or_else(|| format!("not a Claim answer: {answer}"))?;
    let outcome = match kind.as_str() {
        "acquired" => claim_response::Outcome::Acquired(proto::Acquired {
            ownership: Some(ownership(fields)?),
        }),
        "reconcile_first" => {
            let previous_attempt_deadline = match fields.get("previous_attempt_deadline") {
                Some(left) => proto_duration(seconds(left)?),
                None => None,
            };
            claim_response::Outcome::ReconcileFirst(proto::ReconcileFirst {
                ownership: Some(ownership(fields)?),
                previous_state: proto::OperationState::InProgress.into(),
                previous_fence: 9 + number(fields, "attempt")?,
                previous_attempt_deadline,
            })
        }
        "completed" => {
            let (state, outcome) = match fields.get("error") {
                Some(_) => (
                    proto::OperationState::Failed,
                    proto::completed::Outcome::Error(proto::OperationError {
                        reason: proto::FailureReason::Terminal.into(),
                        code: text(fields, "error")?,
                        ..Default::default()
                    }),
                ),
                None => (
                    proto::OperationState::Succeeded,
                    proto::completed::Outcome::Result(proto::Result {
                        body: text(fields, "body")?.into_bytes(),
                        ..Default::default()
                    }),
                ),
            };
            claim_response::Outcome::Completed(proto::Completed {
                operation_id: "op-1".into(),
                state: state.into(),
                outcome: Some(outcome),
                attempts: small(fields, "attempts")?,
                ..Default::default()
            })
        }
        "pending" => {
            let reason = proto::PendingReason::from_str_name(&format!(
                "PENDING_REASON_{}",
                text(fields, "reason")?
            ))
            .ok_or_else(|| format!("a pending reason the runner does not know: {fields}"))?;
            claim_response::Outcome::Pending(proto::Pending {
                operation_id: "op-1".into(),
                reason: reason.into(),
                retry_after: proto_duration(seconds(field(fields, "retry_after")?)?),
                attempt: 1,
            })
        }
        "needs_reconciliation" => {
            claim_response::Outcome::NeedsReconciliation(proto::NeedsReconciliation {
                operation_id: "op-1".into(),
                fence: 14,
                attempts: small(fields, "attempts")?,
            })
        }
        // An outcome added after the client was built decodes as none.
        "unrecognised" => return Ok(proto::ClaimResponse { outcome: None }),
        other => return Err(format!("a Claim answer the runner does not know: {other}")),
    };
    Ok(proto::ClaimResponse {
        outcome: Some(outcome),
    })
}

fn state(name: &str) -> Checked<proto::OperationState> {
    proto::OperationState::from_str_name(&format!("OPERATION_STATE_{name}"))
        .ok_or_else(|| format!("a state the runner does not know: {name}"))
}

fn failure_reason(name: &str) -> Checked<proto::FailureReason> {
    proto::FailureReason::from_str_name(&format!("FAILURE_REASON_{name}"))
        .ok_or_else(|| format!("a failure reason the runner does not know: {name}"))
}

fn fail_response(answer: &Value) -> Checked<proto::FailResponse> {
    let mut response = proto::FailResponse {
        state: state(&text(answer, "state")?)?.into(),
        ..Default::default()
    };
    if answer.get("reason").is_some() {
        response.reason = failure_reason(&text(answer, "reason")?)?.into();
    }
    if let Some(retry_after) = answer.get("retry_after") {
        response.retry_after = proto_duration(seconds(retry_after)?);
    }
    Ok(response)
}

fn stored(answer: &Value) -> Checked<proto::Operation> {
    let mut operation = proto::Operation {
        operation_id: "op-1".into(),
        state: state(&text(answer, "state")?)?.into(),
        attempt: small(answer, "attempt")?,
        ..Default::default()
    };
    if answer.get("body").is_some() {
        operation.result = Some(proto::Result {
            body: text(answer, "body")?.into_bytes(),
            ..Default::default()
        });
    }
    if answer.get("error").is_some() {
        operation.error = Some(proto::OperationError {
            code: text(answer, "error")?,
            reason: failure_reason(&text(answer, "reason")?)?.into(),
            ..Default::default()
        });
    }
    Ok(operation)
}

fn disposition(returns: &Value) -> Checked<Option<Disposition>> {
    if returns.is_null() {
        return Ok(None);
    }
    let error = |code: String| proto::OperationError {
        code,
        ..Default::default()
    };
    Ok(Some(if returns.get("success").is_some() {
        Disposition::Success(proto::Result {
            body: text(returns, "success")?.into_bytes(),
            ..Default::default()
        })
    } else if returns.get("terminal").is_some() {
        Disposition::Terminal(error(text(returns, "terminal")?))
    } else if returns.get("retryable").is_some() {
        Disposition::Retryable(
            error(text(returns, "retryable")?),
            seconds(field(returns, "retry_after")?)?,
        )
    } else {
        Disposition::Unknown(error(text(returns, "unknown")?))
    }))
}

/// The scripted server, provider and clock of one scenario.
struct World {
    name: String,
    call: Value,
    steps: VecDeque<Value>,
    taken: usize,
    origin: Instant,
    now: Instant,
    tokens: Rc<RefCell<Vec<Vec<u8>>>>,
    first_sends: HashMap<usize, Vec<u8>>,
    /// The fence of the attempt the core owns (from the Claim's answer).
    fence: Option<u64>,
}

impl World {
    fn new(scenario: &Value) -> Checked<Self> {
        let origin = Instant::now();
        Ok(Self {
            name: text(scenario, "name")?,
            call: scenario.get("call").cloned().unwrap_or(Value::Null),
            steps: field(scenario, "steps")?
                .as_array()
                .ok_or("steps is not a list")?
                .iter()
                .cloned()
                .collect(),
            taken: 0,
            origin,
            now: origin,
            tokens: Rc::default(),
            first_sends: HashMap::new(),
            fence: None,
        })
    }

    fn setting(&self, name: &str, default: f64) -> Checked<Duration> {
        match self.call.get(name) {
            Some(value) => seconds(value),
            None => Duration::try_from_secs_f64(default).map_err(|error| error.to_string()),
        }
    }

    fn flag(&self, name: &str) -> bool {
        self.call
            .get(name)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    fn operation(&self) -> Checked<Operation> {
        let mut operation = Operation::new(
            "payments.charge",
            "order-1",
            Payload::Json(r#"{"amount":1000,"currency":"EUR"}"#.into()),
        );
        operation.lease = self.setting("lease", 30.0)?;
        operation.attempt_duration = Some(self.setting("attempt_duration", 300.0)?);
        operation.deadline = self.setting("deadline", 60.0)?;
        operation.lookup_interval = self.setting("lookup_interval", 1.0)?;
        operation.provider_deduplicates = self.flag("provider_deduplicates");
        Ok(operation)
    }

    fn at(&self) -> f64 {
        (self.now - self.origin).as_secs_f64()
    }

    fn where_(&self) -> String {
        format!("{:?}, step {}", self.name, self.taken + 1)
    }

    /// The vector's next step, which must be `action`, taken now.
    fn expect(&mut self, action: &str) -> Checked<Value> {
        let Some(step) = self.steps.front().filter(|step| step.get("do").is_some()) else {
            return Err(format!(
                "{}: the client does {action}, the vector expects {:?}",
                self.where_(),
                self.steps.front()
            ));
        };
        if step.get("do").and_then(Value::as_str) != Some(action) {
            return Err(format!(
                "{}: the client does {action}, the vector expects {step}",
                self.where_()
            ));
        }
        if let Some(at) = step.get("at") {
            let at = seconds(at)?;
            if !close(self.now - self.origin, at) {
                return Err(format!(
                    "{}: {action} at {:.6} s, the vector says {} s",
                    self.where_(),
                    self.at(),
                    at.as_secs_f64()
                ));
            }
        }
        let step = step.clone();
        self.steps.pop_front();
        self.taken += 1;
        Ok(step)
    }

    fn takes(step: &Value) -> Checked<Duration> {
        step.get("takes").map_or(Ok(Duration::ZERO), seconds)
    }

    /// One call, re-sent as the client's retry policy decides: each send is
    /// the vector's next step (checked by `check`); the answer and when the
    /// answered send began, or the error the call ends with.
    fn send(
        &mut self,
        action: &str,
        until: Option<Instant>,
        check: &mut dyn FnMut(&World, &Value) -> Checked<()>,
    ) -> Checked<Result<(Value, Instant), Error>> {
        let policy = RetryPolicy::default();
        let mut jitter = Jitter::none();
        let first_sent = self.now;
        let mut sends = 0;
        loop {
            sends += 1;
            let sent_at = self.now;
            let step = self.expect(action)?;
            check(self, &step)?;
            self.now += Self::takes(&step)?;
            let Some(name) = step.get("error") else {
                return Ok(Ok((
                    step.get("answer").cloned().unwrap_or(Value::Null),
                    sent_at,
                )));
            };
            let retry_after = step.get("retry_after").map(seconds).transpose()?;
            let error = scripted_error(name.as_str().unwrap_or_default(), retry_after)?;
            match policy.resend_after(&error, sends, first_sent, self.now, until, &mut jitter) {
                Some(delay) => self.now += delay,
                None => return Ok(Err(error)),
            }
        }
    }

    fn claim(&mut self, request: &proto::ClaimRequest, until: Instant) -> Checked<Answer> {
        let lease = self.setting("lease", 30.0)?;
        let attempt_duration = self.setting("attempt_duration", 300.0)?;
        // The first send of each token is the one a re-send must equal.
        if let Some(number) = self
            .tokens
            .borrow()
            .iter()
            .position(|token| *token == request.claim_token)
        {
            self.first_sends
                .entry(number + 1)
                .or_insert_with(|| request.encode_to_vec());
        }
        let tokens = self.tokens.clone();
        let answered = self.send("claim", Some(until), &mut |world, step| {
            let number = tokens
                .borrow()
                .iter()
                .position(|token| *token == request.claim_token)
                .map(|index| index + 1)
                .ok_or("a Claim with a token the client did not make")?;
            let expected = number_of(step, "token")?;
            if number != expected {
                return Err(format!(
                    "{}: Claim with token {number}, the vector says {expected}",
                    world.where_()
                ));
            }
            if world.first_sends.get(&number) != Some(&request.encode_to_vec()) {
                return Err(format!("{}: a re-sent Claim changed", world.where_()));
            }
            let wait = request.wait.and_then(|wait| Duration::try_from(wait).ok());
            match (step.get("wait"), wait) {
                (None, None) => {}
                (Some(expected), Some(wait)) if close(seconds(expected)?, wait) => {}
                (expected, wait) => {
                    return Err(format!(
                        "{}: a Claim with wait {wait:?}, the vector says {expected:?}",
                        world.where_()
                    ));
                }
            }
            let asked = |duration: Option<prost_types::Duration>| {
                duration.and_then(|duration| Duration::try_from(duration).ok())
            };
            if asked(request.lease) != Some(lease)
                || asked(request.max_attempt_duration) != Some(attempt_duration)
            {
                return Err(format!(
                    "{}: a Claim asking for another lease or attempt duration",
                    world.where_()
                ));
            }
            Ok(())
        });
        Ok(match answered? {
            Ok((answer, sent_at)) => {
                let response = claim_response(&answer)?;
                self.fence = match &response.outcome {
                    Some(claim_response::Outcome::Acquired(proto::Acquired {
                        ownership: Some(ownership),
                    })) => Some(ownership.fence),
                    Some(claim_response::Outcome::ReconcileFirst(first)) => {
                        first.ownership.as_ref().map(|ownership| ownership.fence)
                    }
                    _ => self.fence,
                };
                Answer::Claimed(response, sent_at)
            }
            Err(error) => Answer::Refused(error),
        })
    }

    fn renew(
        &mut self,
        request: &proto::RenewRequest,
        until: Instant,
    ) -> Checked<Result<(proto::RenewResponse, Instant), Error>> {
        let lease = self.setting("lease", 30.0)?;
        let fence = self.fence;
        let answered = self.send("renew", Some(until), &mut |world, _step| {
            let asked = request
                .lease
                .and_then(|duration| Duration::try_from(duration).ok());
            if Some(request.fence) != fence || asked != Some(lease) {
                return Err(format!(
                    "{}: a Renew with fence {} asking for {asked:?}",
                    world.where_(),
                    request.fence
                ));
            }
            Ok(())
        })?;
        Ok(match answered {
            Ok((answer, sent_at)) => Ok((
                proto::RenewResponse {
                    lease: proto_duration(seconds(field(&answer, "lease")?)?),
                    attempt_deadline: proto_duration(seconds(field(&answer, "attempt_deadline")?)?),
                },
                sent_at,
            )),
            Err(error) => Err(error),
        })
    }

    fn complete(&mut self, request: &proto::CompleteRequest, until: Instant) -> Checked<Answer> {
        let body = request
            .result
            .as_ref()
            .map(|result| result.body.clone())
            .unwrap_or_default();
        let answered = self.send("complete", Some(until), &mut |world, step| {
            if body != text(step, "body")?.into_bytes() {
                return Err(format!(
                    "{}: Complete with {:?}",
                    world.where_(),
                    String::from_utf8_lossy(&body)
                ));
            }
            Ok(())
        })?;
        Ok(match answered {
            Ok(_) => Answer::Completed,
            Err(error) => Answer::Refused(error),
        })
    }

    fn fail(&mut self, request: &proto::FailRequest, until: Instant) -> Checked<Answer> {
        let disposition = request
            .disposition()
            .as_str_name()
            .trim_start_matches("FAIL_DISPOSITION_")
            .to_owned();
        let code = request
            .error
            .as_ref()
            .map(|error| error.code.clone())
            .unwrap_or_default();
        let retry_after = request
            .retry_after
            .and_then(|duration| Duration::try_from(duration).ok());
        let answered = self.send("fail", Some(until), &mut |world, step| {
            let expected = text(step, "disposition")?;
            if disposition != expected {
                return Err(format!(
                    "{}: Fail {disposition}, the vector says {expected}",
                    world.where_()
                ));
            }
            if step.get("code").is_some() && code != text(step, "code")? {
                return Err(format!("{}: Fail with code {code:?}", world.where_()));
            }
            let expected = step.get("retry_after").map(seconds).transpose()?;
            if retry_after != expected {
                return Err(format!(
                    "{}: Fail with retry_after {retry_after:?}, the vector says {expected:?}",
                    world.where_()
                ));
            }
            Ok(())
        })?;
        Ok(match answered {
            Ok((answer, _)) => Answer::Failed(fail_response(&answer)?),
            Err(error) => Answer::Refused(error),
        })
    }

    fn lookup(&mut self) -> Checked<Answer> {
        let answered = self.send("lookup", None, &mut |_, _| Ok(()))?;
        Ok(match answered {
            Ok((answer, _)) => Answer::Stored(Box::new(stored(&answer)?)),
            Err(error) => Answer::Refused(error),
        })
    }

    /// Lets `takes` pass within the attempt, the background renewals falling
    /// due on the way (strictly before the step ends, or the cancel point);
    /// `false` when the guard stopped the work.
    fn guarded<T>(&mut self, protocol: &mut Protocol<'_, T>, takes: Duration) -> Checked<bool>
    where
        T: FnMut() -> Result<Vec<u8>, Error>,
    {
        let cancel_at = protocol
            .cancel_at()
            .ok_or_else(|| format!("{}: a guarded step outside an attempt", self.where_()))?;
        let ends = self.now + takes;
        for _ in 0..1000 {
            let stop = ends.min(cancel_at);
            if let Some(due) = protocol.renewal_due().filter(|due| *due < stop) {
                self.now = self.now.max(due);
                let (request, until) = protocol
                    .renewal()
                    .ok_or("a renewal due outside an attempt")?;
                let answer = self.renew(&request, until)?;
                let answer = match &answer {
                    Ok((renewed, sent_at)) => Ok((renewed, *sent_at)),
                    Err(error) => Err(error),
                };
                if protocol.background_renewal(answer, self.now) {
                    return Ok(false);
                }
                continue;
            }
            if ends > cancel_at {
                self.now = self.now.max(cancel_at);
                return Ok(false);
            }
            self.now = ends;
            return Ok(true);
        }
        Err(format!("{}: the renewals never end", self.where_()))
    }

    /// Performs one step of the core; its answer.
    fn perform<T>(&mut self, step: Step, protocol: &mut Protocol<'_, T>) -> Checked<Answer>
    where
        T: FnMut() -> Result<Vec<u8>, Error>,
    {
        match step {
            Step::Claim { request, until } => self.claim(&request, until),
            Step::Renew { request, until } => Ok(match self.renew(&request, until)? {
                Ok((renewed, sent_at)) => Answer::Renewed(renewed, sent_at),
                Err(error) => Answer::Refused(error),
            }),
            Step::Complete { request, until } => self.complete(&request, until),
            Step::Fail { request, until } => self.fail(&request, until),
            Step::Lookup { operation_id } => {
                if operation_id != "op-1" {
                    return Err(format!("{}: Lookup of {operation_id}", self.where_()));
                }
                self.lookup()
            }
            Step::Sleep(pause) => {
                self.now += pause;
                Ok(Answer::Done)
            }
            Step::Pause(pause) => Ok(if self.guarded(protocol, pause)? {
                Answer::Done
            } else {
                Answer::Interrupted
            }),
            Step::Effect(context) => self.work("effect", &context, protocol),
            Step::ProviderLookup(context) => self.work("provider_lookup", &context, protocol),
            Step::Finish(_) | Step::Raise(_) => {
                Err(format!("{}: the call already ended", self.where_()))
            }
        }
    }

    /// The effect or the provider lookup, as the vector scripts it.
    fn work<T>(
        &mut self,
        action: &str,
        context: &EffectContext,
        protocol: &mut Protocol<'_, T>,
    ) -> Checked<Answer>
    where
        T: FnMut() -> Result<Vec<u8>, Error>,
    {
        let script = self.expect(action)?;
        if let Some(expected) = script.get("previous_outcome_unknown") {
            let told = context.previous_outcome_unknown().is_some();
            if expected.as_bool() != Some(told) {
                return Err(format!(
                    "{}: previous_outcome_unknown is {told}",
                    self.where_()
                ));
            }
        }
        if !self.guarded(protocol, Self::takes(&script)?)? {
            return Ok(Answer::Interrupted);
        }
        if script.get("raises").and_then(Value::as_bool) == Some(true) {
            return Ok(Answer::Raised("scripted".into()));
        }
        let returns = disposition(script.get("returns").unwrap_or(&Value::Null))?;
        if action == "provider_lookup" {
            return Ok(Answer::LookedUp(returns));
        }
        returns
            .map(Answer::Returned)
            .ok_or_else(|| format!("{}: an effect that returns nothing", self.where_()))
    }

    /// Drives the core through the scenario and checks how the call ended.
    fn run(mut self) -> Checked<()> {
        let operation = self.operation()?;
        let tokens = self.tokens.clone();
        let mut protocol = Protocol::new(&operation, self.flag("lookup"), move || {
            let mut tokens = tokens.borrow_mut();
            let token = format!("claim-token-{:04}", tokens.len() + 1).into_bytes();
            tokens.push(token.clone());
            Ok(token)
        });
        let mut step = protocol.start(self.now);
        let ended = loop {
            step = match step {
                Step::Finish(execution) => break Ok(execution),
                Step::Raise(error) => break Err(error),
                step => {
                    let answer = self.perform(step, &mut protocol)?;
                    protocol.next(answer, self.now)
                }
            };
        };
        self.check_end(ended)
    }

    fn check_end(&self, ended: Result<Execution, Error>) -> Checked<()> {
        let name = &self.name;
        let [last] = self.steps.iter().collect::<Vec<_>>()[..] else {
            return Err(format!(
                "{}: the call ended ({ended:?}) before the vector's step {:?}",
                self.where_(),
                self.steps.front()
            ));
        };
        if let Some(expected) = last.get("result") {
            let Ok(Execution {
                outcome: Outcome::Succeeded(result),
                source,
                attempt,
                ..
            }) = &ended
            else {
                return Err(format!(
                    "{name:?}: ended {ended:?}, the vector expects {expected}"
                ));
            };
            let want = (
                text(expected, "body")?.into_bytes(),
                field(expected, "replayed")?.as_bool(),
                small(expected, "attempts")?,
            );
            let got = (result.body.clone(), Some(replayed(*source)), *attempt);
            if got != want {
                return Err(format!(
                    "{name:?}: the result {got:?}, the vector expects {want:?}"
                ));
            }
            return Ok(());
        }
        let expected = field(last, "raises")?;
        let kind = text(expected, "kind")?;
        let (got, reason, code, was_replayed) = match &ended {
            Ok(Execution {
                outcome: Outcome::Failed(error),
                source,
                ..
            }) => (
                "OPERATION_FAILED",
                Some(
                    error
                        .reason()
                        .as_str_name()
                        .trim_start_matches("FAILURE_REASON_")
                        .to_owned(),
                ),
                None,
                Some(replayed(*source)),
            ),
            Ok(_) => ("RESULT", None, None, None),
            Err(error) => {
                let kind = match error {
                    Error::OutcomeUnknown {
                        because: UnknownBecause::AttemptTimedOut,
                        ..
                    } => "ATTEMPT_TIMEOUT",
                    Error::OutcomeUnknown { .. } => "OUTCOME_UNKNOWN",
                    Error::DeadlinePassed { .. } => "PENDING",
                    Error::NeedsReconciliation { .. } => "NEEDS_RECONCILIATION",
                    Error::Superseded { .. } => "SUPERSEDED",
                    Error::UnrecognisedOutcome => "UNRECOGNISED_OUTCOME",
                    _ => "STATUS",
                };
                (kind, status_reason(error), status_code(error), None)
            }
        };
        let wrong = |what: &str| {
            Err(format!(
                "{name:?}: ended {ended:?} ({what}), the vector expects {expected}"
            ))
        };
        if got != kind {
            return wrong("kind");
        }
        if kind == "OPERATION_FAILED"
            && (reason != Some(text(expected, "reason")?)
                || was_replayed != field(expected, "replayed")?.as_bool())
        {
            return wrong("reason or replayed");
        }
        if kind == "STATUS" {
            if expected.get("reason").is_some() && reason != Some(text(expected, "reason")?) {
                return wrong("reason");
            }
            if expected.get("code").is_some() && code != Some(text(expected, "code")?) {
                return wrong("code");
            }
        }
        Ok(())
    }
}

fn number_of(step: &Value, name: &str) -> Checked<usize> {
    usize::try_from(number(step, name)?).map_err(|error| error.to_string())
}

/// Whether the call answers with what was stored before (not this call's).
fn replayed(source: Source) -> bool {
    matches!(source, Source::Replayed | Source::Superseded)
}

/// The ErrorInfo reason an error was decoded from, as the vectors name it.
fn status_reason(error: &Error) -> Option<String> {
    Some(match error {
        Error::Conflict { .. } => "IDEMPOTENCY_KEY_REUSED".into(),
        Error::ResultExpired { .. } => "RESULT_EXPIRED".into(),
        Error::LeaseLost { .. } => "LEASE_LOST".into(),
        Error::InvalidArgument { .. } => "INVALID_REQUEST".into(),
        Error::FailedPrecondition { reason, .. } => reason.clone(),
        _ => return None,
    })
}

/// The gRPC code of a status without idemd's ErrorInfo, as the vectors name it.
fn status_code(error: &Error) -> Option<String> {
    let code = match error {
        Error::Unavailable { .. } => Code::Unavailable,
        Error::DeadlineExceeded { .. } => Code::DeadlineExceeded,
        Error::ResourceExhausted { .. } => Code::ResourceExhausted,
        Error::Transport { code, .. } => *code,
        _ => return None,
    };
    Some(
        match code {
            Code::Unavailable => "UNAVAILABLE",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            _ => "OTHER",
        }
        .into(),
    )
}

fn scenarios() -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/protocol/vectors.json");
    let text = std::fs::read_to_string(&path).expect("testdata/protocol/vectors.json");
    let vectors: Value = serde_json::from_str(&text).expect("the vectors are JSON");
    vectors
        .get("scenarios")
        .and_then(Value::as_array)
        .cloned()
        .expect("a list of scenarios")
}

#[test]
fn every_shared_protocol_vector_passes() {
    let scenarios = scenarios();
    assert!(!scenarios.is_empty());
    let failures: Vec<String> = scenarios
        .iter()
        .filter_map(|scenario| World::new(scenario).and_then(World::run).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} protocol vectors fail:\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
}

#[test]
fn every_scenario_has_a_distinct_name() {
    let scenarios = scenarios();
    let names: std::collections::HashSet<_> = scenarios
        .iter()
        .map(|scenario| scenario.get("name").and_then(Value::as_str))
        .collect();
    assert_eq!(names.len(), scenarios.len());
    assert!(!names.contains(&None));
}

//! Micro-batching: concurrent calls on one replica share one statement.
//!
//! Callers queue their request and wait for its answer. One worker takes
//! whatever is queued once a statement slot is free (at most `in_flight`
//! statements run at once), so under load the queue fills while statements
//! run and N calls cost one round trip and one commit; alone, a call runs at
//! once, in a batch of one. Members of one statement never share a key (two
//! claims of one scope, two writes of one operation): a repeated key waits
//! for the next statement. Each member's answer is its own: the statement
//! settles every member's row independently. A statement that fails as a
//! whole is retried member by member, so one member's problem is its own;
//! when the database is unavailable, each member hears so (every member is
//! safe to re-send).

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::trace::TraceContextExt;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::domain::{Error, Result};

/// The most members one statement carries.
const MAX_MEMBERS: usize = 256;
/// The most bytes of values one statement carries (a member larger than
/// this goes alone): results of up to 1 MiB each shared one UPDATE, and
/// 188 of them took 3.6 s, so one slow batch failed every member against
/// the statement timeout although each alone takes milliseconds.
pub(super) const MAX_BATCH_BYTES: usize = 2 * 1024 * 1024;

/// Runs one statement for its members and answers each, in order.
type RunBatch<Request, Response> = Arc<
    dyn Fn(Arc<Vec<Request>>) -> Pin<Box<dyn Future<Output = Result<Vec<Response>>> + Send>>
        + Send
        + Sync,
>;

struct Queued<Request, Response> {
    request: Request,
    answer: oneshot::Sender<Result<Response>>,
    /// The caller's span: the statement appears in its trace.
    span: tracing::Span,
}

pub(crate) struct Batcher<Request, Response> {
    sender: mpsc::UnboundedSender<Queued<Request, Response>>,
    /// Statement slots, shared with the worker.
    slots: Arc<Semaphore>,
    /// Calls sent to the worker and not yet taken into a statement.
    waiting: Arc<AtomicUsize>,
    run: RunBatch<Request, Response>,
    /// Taken by the first call, which starts the worker (a store may be
    /// built outside a runtime).
    worker: Arc<Mutex<Option<Worker<Request, Response>>>>,
}

impl<Request, Response> Clone for Batcher<Request, Response> {
    fn clone(&self) -> Self {
        Self {
            sender: self.sender.clone(),
            slots: Arc::clone(&self.slots),
            waiting: Arc::clone(&self.waiting),
            run: Arc::clone(&self.run),
            worker: Arc::clone(&self.worker),
        }
    }
}

struct Worker<Request, Response> {
    receiver: mpsc::UnboundedReceiver<Queued<Request, Response>>,
    /// The bytes a member's values take in a statement, about.
    size: fn(&Request) -> usize,
    run: RunBatch<Request, Response>,
    /// How long one statement of the worker's may take (zero: unbounded).
    /// Its members' calls are bounded by their callers, but the statement
    /// runs on a task nothing else times out: without this bound, one
    /// stuck on a database that stopped answering held its connection, and
    /// its statement slot, for good.
    bound: Duration,
    key: fn(&Request) -> Vec<u8>,
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
}

impl<Request, Response> Batcher<Request, Response>
where
    Request: Send + Sync + 'static,
    Response: Send + 'static,
{
    /// `run` executes one statement for its members and answers each, in
    /// order; `key` names what two members of one statement must not share.
    pub(crate) fn new(
        in_flight: usize,
        bound: Duration,
        key: fn(&Request) -> Vec<u8>,
        size: fn(&Request) -> usize,
        run: impl Fn(Arc<Vec<Request>>) -> Pin<Box<dyn Future<Output = Result<Vec<Response>>> + Send>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let run: RunBatch<Request, Response> = Arc::new(run);
        let slots = Arc::new(Semaphore::new(in_flight.max(1)));
        let waiting = Arc::new(AtomicUsize::new(0));
        Self {
            sender,
            slots: Arc::clone(&slots),
            waiting: Arc::clone(&waiting),
            run: Arc::clone(&run),
            worker: Arc::new(Mutex::new(Some(Worker {
                receiver,
                run,
                bound,
                key,
                size,
                slots,
                waiting,
            }))),
        }
    }

    /// Queues `request` and waits for its answer. With a statement slot
    /// free and no call waiting, it runs at once, on the caller's task: alone
    /// there is nothing to share, and no hand-off to pay for.
    pub(crate) async fn call(&self, request: Request) -> Result<Response> {
        self.start_once();
        if self.waiting.load(Ordering::Acquire) == 0
            && let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned()
        {
            let outcome = (self.run)(Arc::new(vec![request])).await;
            drop(slot);
            let mut responses = outcome?;
            return match (responses.pop(), responses.is_empty()) {
                (Some(response), true) => Ok(response),
                _ => Err(Error::Internal(
                    "a batch answered the wrong number of members".into(),
                )),
            };
        }
        let (answer, answered) = oneshot::channel();
        self.waiting.fetch_add(1, Ordering::AcqRel);
        self.sender
            .send(Queued {
                request,
                answer,
                span: tracing::Span::current(),
            })
            .map_err(|_| Error::unavailable("the store is closing"))?;
        answered
            .await
            .unwrap_or_else(|_| Err(Error::unavailable("the statement was abandoned")))
    }

    fn start_once(&self) {
        let Ok(mut worker) = self.worker.lock() else {
            return;
        };
        if worker.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if let Some(worker) = worker.take() {
            runtime.spawn(worker.work());
        }
    }
}

impl<Request, Response> Worker<Request, Response>
where
    Request: Send + Sync + 'static,
    Response: Send + 'static,
{
    async fn work(mut self) {
        let slots = Arc::clone(&self.slots);
        let mut queued = Vec::new();
        let mut held_back = Vec::new();
        loop {
            // Work first (an idle worker holds no slot, so a lone call can
            // run at once on its own task), then a free slot, then
            // everything queued meanwhile: the queue is what makes the batch.
            if held_back.is_empty() && self.receiver.recv_many(&mut queued, MAX_MEMBERS).await == 0
            {
                return;
            }
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            queued.splice(0..0, held_back.drain(..));
            while queued.len() < MAX_MEMBERS {
                match self.receiver.try_recv() {
                    Ok(more) => queued.push(more),
                    Err(_) => break,
                }
            }
            let batch = self.distinct(&mut queued, &mut held_back);
            self.waiting.fetch_sub(batch.len(), Ordering::AcqRel);
            let run = Arc::clone(&self.run);
            let bound = self.bound;
            tokio::spawn(async move {
                answer(batch, run, bound).await;
                drop(slot);
            });
        }
    }

    /// The members of one statement, one per key, in arrival order; the
    /// others are held back for the next one.
    fn distinct(
        &self,
        queued: &mut Vec<Queued<Request, Response>>,
        held_back: &mut Vec<Queued<Request, Response>>,
    ) -> Vec<Queued<Request, Response>> {
        let mut keys = HashSet::with_capacity(queued.len());
        let mut batch = Vec::with_capacity(queued.len());
        let mut bytes = 0usize;
        for member in queued.drain(..) {
            let size = (self.size)(&member.request);
            let fits = batch.is_empty() || bytes.saturating_add(size) <= MAX_BATCH_BYTES;
            if batch.len() < MAX_MEMBERS && fits && keys.insert((self.key)(&member.request)) {
                bytes = bytes.saturating_add(size);
                batch.push(member);
            } else {
                held_back.push(member);
            }
        }
        batch
    }
}

/// `statement`, abandoned past `bound` (its connection with it) as
/// UNAVAILABLE: every member is safe to re-send.
async fn bounded<T>(bound: Duration, statement: impl Future<Output = Result<T>>) -> Result<T> {
    if bound.is_zero() {
        return statement.await;
    }
    tokio::time::timeout(bound, statement)
        .await
        .unwrap_or_else(|_| Err(Error::unavailable("the database did not answer in time")))
}

async fn answer<Request, Response>(
    batch: Vec<Queued<Request, Response>>,
    run: RunBatch<Request, Response>,
    bound: Duration,
) where
    Request: Send + Sync + 'static,
    Response: Send + 'static,
{
    let span = batch_span(&batch);
    let (requests, answers): (Vec<_>, Vec<_>) = batch
        .into_iter()
        .map(|queued| (queued.request, queued.answer))
        .unzip();
    let requests = Arc::new(requests);
    let outcome = bounded(bound, run(Arc::clone(&requests)).instrument(span.clone())).await;
    let members = answers.len();
    let failed_internally = matches!(outcome, Err(Error::Internal(_)));
    if !(members > 1 && failed_internally) {
        deliver(answers, outcome, members);
        return;
    }
    // One member may be the cause: each on its own.
    let Some(requests) = Arc::into_inner(requests) else {
        deliver(answers, outcome, members);
        return;
    };
    for (request, answer) in requests.into_iter().zip(answers) {
        let single = Arc::new(vec![request]);
        let outcome = bounded(bound, run(single).instrument(span.clone())).await;
        deliver(vec![answer], outcome, 1);
    }
}

/// The span of one shared statement: a child of its first member's call,
/// linked to every other member's, so each trace finds the statement.
fn batch_span<Request, Response>(batch: &[Queued<Request, Response>]) -> tracing::Span {
    let first = batch.first().map(|queued| queued.span.clone());
    let span = tracing::info_span!(
        parent: first.and_then(|first| first.id()),
        "db.batch",
        otel.name = "store batch",
        batch.members = batch.len(),
    );
    for other in batch.iter().skip(1) {
        let context = other.span.context().span().span_context().clone();
        if context.is_valid() {
            span.add_link(context);
        }
    }
    span
}

fn deliver<Response>(
    answers: Vec<oneshot::Sender<Result<Response>>>,
    outcome: Result<Vec<Response>>,
    members: usize,
) {
    let outcome = match outcome {
        Ok(responses) if responses.len() != members => Err(Error::Internal(
            "a batch answered the wrong number of members".into(),
        )),
        outcome => outcome,
    };
    match outcome {
        Ok(responses) => {
            for (answer, response) in answers.into_iter().zip(responses) {
                let _ = answer.send(Ok(response));
            }
        }
        Err(error) => {
            for answer in answers {
                let _ = answer.send(Err(error.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key(request: &u32) -> Vec<u8> {
        (request % 10).to_be_bytes().to_vec()
    }

    type Statement = Pin<Box<dyn Future<Output = Result<Vec<u32>>> + Send>>;

    /// A statement that takes a while and records each batch it ran.
    fn recording(
        batches: Arc<Mutex<Vec<Vec<u32>>>>,
        fail_internally_with: Option<u32>,
    ) -> impl Fn(Arc<Vec<u32>>) -> Statement + Send + Sync + 'static {
        move |requests| {
            let batches = Arc::clone(&batches);
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if let Ok(mut batches) = batches.lock() {
                    batches.push(requests.to_vec());
                }
                if fail_internally_with.is_some_and(|bad| requests.contains(&bad)) {
                    return Err(Error::Internal("bad member".into()));
                }
                Ok(requests.iter().map(|request| request * 100).collect())
            })
        }
    }

    #[tokio::test]
    async fn concurrent_calls_share_statements_and_each_gets_its_own_answer() {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let batcher = Batcher::new(
            1,
            Duration::ZERO,
            key,
            |_| 1,
            recording(Arc::clone(&batches), None),
        );
        let calls: Vec<_> = (0..10u32)
            .map(|request| {
                let batcher = batcher.clone();
                tokio::spawn(async move { (request, batcher.call(request).await) })
            })
            .collect();
        for call in calls {
            let (request, answer) = call.await.expect("joined");
            assert_eq!(answer, Ok(request * 100));
        }
        let batches = batches.lock().expect("unpoisoned").clone();
        assert!(
            batches.len() < 10,
            "ten concurrent calls in fewer statements: {batches:?}"
        );
        assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 10);
    }

    #[tokio::test]
    async fn members_of_one_statement_never_share_a_key() {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let batcher = Batcher::new(
            1,
            Duration::ZERO,
            key,
            |_| 1,
            recording(Arc::clone(&batches), None),
        );
        // 3, 13 and 23 share a key.
        let calls: Vec<_> = [3u32, 13, 23, 4]
            .into_iter()
            .map(|request| {
                let batcher = batcher.clone();
                tokio::spawn(async move { batcher.call(request).await })
            })
            .collect();
        for call in calls {
            assert!(call.await.expect("joined").is_ok());
        }
        for batch in batches.lock().expect("unpoisoned").iter() {
            let mut keys: Vec<_> = batch.iter().map(key).collect();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), batch.len(), "{batch:?}");
        }
    }

    #[tokio::test]
    async fn a_statement_failing_internally_is_retried_member_by_member() {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let batcher = Batcher::new(
            1,
            Duration::ZERO,
            key,
            |_| 1,
            recording(Arc::clone(&batches), Some(5)),
        );
        let calls: Vec<_> = (0..6u32)
            .map(|request| {
                let batcher = batcher.clone();
                tokio::spawn(async move { (request, batcher.call(request).await) })
            })
            .collect();
        for call in calls {
            let (request, answer) = call.await.expect("joined");
            if request == 5 {
                assert!(matches!(answer, Err(Error::Internal(_))), "{answer:?}");
            } else {
                assert_eq!(answer, Ok(request * 100), "the others are unharmed");
            }
        }
    }
}

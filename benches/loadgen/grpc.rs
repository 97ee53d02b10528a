//! The `grpc` cell: clients driving a running idemd.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::args::{GrpcArgs, Workload};
use crate::client::{ClaimAnswer, Client, fingerprint_of, replay_key};
use crate::drive::{ClientPlan, Stop, drive_client};
use crate::tally::{Tally, own_cpu_seconds, report};
use crate::{BoxError, REPLAYS_CHECKED_BEFORE_TIMING, RESULT_BODY};

pub(crate) async fn run_grpc(args: GrpcArgs) -> Result<Value, BoxError> {
    let token = std::env::var("IDEMD_BENCH_TOKEN").unwrap_or_default();
    if token.is_empty() && args.workload != Workload::Floor {
        return Err("set IDEMD_BENCH_TOKEN to a tenant's bearer token".into());
    }
    if matches!(args.workload, Workload::Replay | Workload::Lookup) && args.replay_keys == 0 {
        return Err(
            "replay and lookup need --replay-keys (operations completed before the run)".into(),
        );
    }
    let concurrency = args.limits.concurrency.max(1);
    if args.workload == Workload::Mixed && args.limits.operations.is_none() {
        return Err("mixed needs --operations: its conflicts are counted in advance".into());
    }
    if args.workload == Workload::Replay {
        check_replays_before_timing(&args, &token).await?;
    }
    let total_mixed = args.limits.operations.unwrap_or(0);
    let start = Arc::new(tokio::sync::Barrier::new(concurrency + 1));
    let stop = Arc::new(std::sync::OnceLock::new());
    let run_id: Arc<str> = args.run_id.clone().into();
    let replay_prefix: Arc<str> = args.replay_prefix.clone().into();
    let mut clients = Vec::with_capacity(concurrency);
    for index in 0..concurrency {
        let client = Client::connect(&args.address, &token).await?;
        let share = total_mixed / concurrency as u64
            + u64::from((index as u64) < total_mixed % concurrency as u64);
        let plan = ClientPlan {
            index,
            workload: args.workload,
            run_id: run_id.clone(),
            replay_keys: args.replay_keys,
            replay_prefix: replay_prefix.clone(),
            mixed_requests: share,
            seed: args.seed,
        };
        clients.push(tokio::spawn(drive_client(
            client,
            plan,
            start.clone(),
            stop.clone(),
        )));
    }
    let cpu_before = own_cpu_seconds();
    let started = Instant::now();
    // Mixed runs its plan to the end: its conflicts were counted from it.
    stop.set(Stop::new(&args.limits, started))
        .map_err(|_| "limits set twice")?;
    start.wait().await;
    let mut tally = Tally::new()?;
    for client in clients {
        tally.merge(client.await??)?;
    }
    let elapsed = started.elapsed();
    let cpu = own_cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let replayed_keys_are_executed = args.workload == Workload::Replay;
    Ok(report(
        args.workload.name(),
        concurrency,
        elapsed,
        &tally,
        replayed_keys_are_executed,
        (args.workload == Workload::Mixed).then_some(tally.expected_conflicts),
        cpu,
    ))
}

/// A few replays must return the stored result before anything is timed:
/// otherwise the preload and the load generator disagree and the numbers
/// would mean nothing.
pub(crate) async fn check_replays_before_timing(
    args: &GrpcArgs,
    token: &str,
) -> Result<(), BoxError> {
    let mut client = Client::connect(&args.address, token).await?;
    let mut tally = Tally::new()?;
    let checked = REPLAYS_CHECKED_BEFORE_TIMING.min(args.replay_keys);
    for step in 0..checked {
        let key = replay_key(
            &args.replay_prefix,
            1 + step * (args.replay_keys / checked.max(1)),
        );
        match client.claim(&mut tally, &key, fingerprint_of(&key)).await {
            ClaimAnswer::Completed { body } if body.as_deref() == Some(RESULT_BODY) => {}
            _ => {
                return Err(format!(
                    "replay check failed: a preloaded operation did not replay its stored \
                     result (outcomes {:?}, statuses {:?})",
                    tally.outcomes, tally.statuses
                )
                .into());
            }
        }
    }
    Ok(())
}

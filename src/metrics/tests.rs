use super::*;

fn sample(rendered: &str, series: &str) -> Option<f64> {
    rendered
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn each_label_set_counts_in_its_own_series_and_repeats_add_up() {
    let policy = LabelPolicy {
        operations: HashSet::from(["payments.charge".to_owned()]),
        tenant: true,
    };
    let (metrics, _) = Metrics::new(policy, None).expect("a registry builds");
    for _ in 0..3 {
        metrics.claim(TenantId(1), "payments.charge", ClaimOutcome::Replayed);
    }
    metrics.claim(TenantId(2), "payments.charge", ClaimOutcome::Replayed);
    metrics.claim(TenantId(1), "emails.send", ClaimOutcome::Replayed);
    metrics.claim(TenantId(1), "sms.send", ClaimOutcome::ReconcileFirst);
    metrics.stale_write(TenantId(1), "payments.charge", "complete");

    let rendered = metrics.render();
    let claims = |operation: &str, tenant: i64, outcome: &str| {
        sample(
            &rendered,
            &format!(
                "idemd_claims_total{{operation=\"{operation}\",tenant=\"{tenant}\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(
        claims("payments.charge", 1, "replayed"),
        Some(3.0),
        "{rendered}"
    );
    assert_eq!(
        claims("payments.charge", 2, "replayed"),
        Some(1.0),
        "{rendered}"
    );
    assert_eq!(claims("other", 1, "replayed"), Some(1.0), "{rendered}");
    assert_eq!(
        claims("other", 1, "reconcile_first"),
        Some(1.0),
        "{rendered}"
    );
    assert_eq!(
        sample(
            &rendered,
            "idemd_takeovers_total{operation=\"other\",tenant=\"1\"}"
        ),
        Some(1.0),
        "{rendered}"
    );
    assert_eq!(
        sample(
            &rendered,
            "idemd_stale_writes_refused_total{operation=\"payments.charge\",tenant=\"1\",rpc=\"complete\"}"
        ),
        Some(1.0),
        "{rendered}"
    );
    assert!(!rendered.contains("emails.send") && !rendered.contains("sms.send"));
}

#[test]
fn every_family_is_exposed_with_its_help_text() {
    let (metrics, _) = Metrics::new(LabelPolicy::default(), None).expect("a registry builds");
    let tenant = TenantId(1);
    metrics.claim(tenant, "op", ClaimOutcome::ReconcileFirst);
    metrics.stale_write(tenant, "op", "complete");
    metrics.late_write(tenant, "op", "complete");
    metrics.suspected_new_key_retry(tenant, "op");
    metrics.completion(tenant, "op");
    metrics.failure(tenant, "op", FailDisposition::Retryable);
    metrics.reconciliation(tenant, "op", &Resolution::NotApplied);
    metrics.swept(&SweepReport {
        tombstoned: 1,
        deadline_exceeded: 0,
        deleted: 0,
    });
    metrics.waiter_refused();
    metrics.connection_refused();
    metrics.tls_reload_failed();
    metrics.policy_reload_failed();
    metrics.call_refused("OVERLOADED");
    metrics.operation_counts(&OperationCounts {
        in_progress: 1,
        unresolved: 1,
        retry_wait: 1,
        sweep_backlog: 1,
        oldest_unresolved: Some(replica_clock()),
        database_now: replica_clock(),
    });
    metrics.pool_usage(&PoolUsage {
        size: 2,
        idle: 1,
        max: 4,
        waits: crate::store::acquire::AcquireTotals::default(),
    });
    metrics.gauge(&DB_CLOCK_OFFSET.key()).set(0.0);
    metrics.waiting_claims(1);
    metrics.rpc_latency("Claim", "Ok", Duration::from_millis(1));
    metrics.store_latency("transition", Duration::from_millis(1));
    metrics.claim_wait(Duration::from_millis(1));
    metrics.result_cache_lookup(true);
    let _in_flight = metrics.request_in_flight();
    metrics.serving(true);
    metrics.process();
    let rendered = metrics.render();
    for family in FAMILIES {
        let help = format!("# HELP {} {}\n", family.name, family.help);
        assert!(rendered.contains(&help), "{help}in {rendered}");
    }
}

#[test]
fn the_tenant_label_appears_only_when_asked_for() {
    let (metrics, _) = Metrics::new(LabelPolicy::default(), None).expect("a registry builds");
    metrics.completion(TenantId(1), "payments.charge");
    metrics.completion(TenantId(2), "payments.charge");
    let rendered = metrics.render();
    assert_eq!(
        sample(&rendered, "idemd_completions_total{operation=\"other\"}"),
        Some(2.0),
        "{rendered}"
    );
    assert!(!rendered.contains("tenant="), "{rendered}");
}

#[test]
fn latencies_are_recorded_per_rpc_code_and_store_call() {
    let (metrics, _) = Metrics::new(LabelPolicy::default(), None).expect("a registry builds");
    for _ in 0..2 {
        metrics.rpc_latency("Claim", "Ok", Duration::from_millis(1));
        metrics.store_latency("transition", Duration::from_millis(1));
    }
    metrics.rpc_latency("Claim", "Aborted", Duration::from_millis(1));
    let rendered = metrics.render();
    assert_eq!(
        sample(
            &rendered,
            "idemd_rpc_duration_seconds_count{rpc=\"Claim\",code=\"Ok\"}"
        ),
        Some(2.0),
        "{rendered}"
    );
    assert_eq!(
        sample(
            &rendered,
            "idemd_rpc_duration_seconds_count{rpc=\"Claim\",code=\"Aborted\"}"
        ),
        Some(1.0),
        "{rendered}"
    );
    assert_eq!(
        sample(
            &rendered,
            "idemd_store_duration_seconds_count{call=\"transition\"}"
        ),
        Some(2.0),
        "{rendered}"
    );
}

#[test]
fn the_build_is_named_from_the_start() {
    let (metrics, _) = Metrics::new(LabelPolicy::default(), None).expect("a registry builds");
    let series = format!(
        "idemd_build_info{{version=\"{}\"}}",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(sample(&metrics.render(), &series), Some(1.0));
}

#[test]
fn calls_count_in_flight_until_their_guard_drops() {
    let (metrics, _) = Metrics::new(LabelPolicy::default(), None).expect("a registry builds");
    let first = metrics.request_in_flight();
    let second = metrics.request_in_flight();
    assert_eq!(
        sample(&metrics.render(), "idemd_requests_in_flight"),
        Some(2.0)
    );
    drop(first);
    assert_eq!(
        sample(&metrics.render(), "idemd_requests_in_flight"),
        Some(1.0)
    );
    drop(second);
    assert_eq!(
        sample(&metrics.render(), "idemd_requests_in_flight"),
        Some(0.0)
    );
}

#[test]
fn cache_lookups_count_hits_and_misses_apart() {
    let (metrics, _) = Metrics::new(LabelPolicy::default(), None).expect("a registry builds");
    metrics.result_cache_lookup(true);
    metrics.result_cache_lookup(true);
    metrics.result_cache_lookup(false);
    let rendered = metrics.render();
    assert_eq!(
        sample(
            &rendered,
            "idemd_result_cache_lookups_total{result=\"hit\"}"
        ),
        Some(2.0),
        "{rendered}"
    );
    assert_eq!(
        sample(
            &rendered,
            "idemd_result_cache_lookups_total{result=\"miss\"}"
        ),
        Some(1.0),
        "{rendered}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn the_process_is_measured_from_proc() {
    let (metrics, _) = Metrics::new(LabelPolicy::default(), None).expect("a registry builds");
    // Some memory and descriptors this test can see in the numbers.
    let held = vec![1_u8; 8 << 20];
    let file = std::fs::File::open("/proc/self/status").expect("/proc is mounted");
    metrics.process();
    let rendered = metrics.render();
    let resident = sample(&rendered, "process_resident_memory_bytes").expect("resident memory");
    assert!(resident >= 8.0 * 1024.0 * 1024.0, "{rendered}");
    let open = sample(&rendered, "process_open_fds").expect("open descriptors");
    assert!(open >= 4.0, "{rendered}");
    assert!(sample(&rendered, "process_threads").expect("threads") >= 1.0);
    assert!(sample(&rendered, "process_start_time_seconds").expect("start") > 1.6e9);
    drop((held, file));
}

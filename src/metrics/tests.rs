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
    metrics.call_refused("OVERLOADED");
    metrics.operation_counts(&OperationCounts {
        in_progress: 1,
        unresolved: 1,
        retry_wait: 1,
        sweep_backlog: 1,
        database_now: replica_clock(),
    });
    metrics.pool_usage(&PoolUsage {
        size: 2,
        idle: 1,
        max: 4,
    });
    metrics.gauge(&DB_CLOCK_OFFSET.key()).set(0.0);
    metrics.waiting_claims(1);
    metrics.rpc_latency("Claim", "Ok", Duration::from_millis(1));
    metrics.store_latency("transition", Duration::from_millis(1));
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

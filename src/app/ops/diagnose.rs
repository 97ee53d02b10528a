//! `idemd ops diagnose`: what the evidence about one operation means and the
//! next safe moves, as the server's Diagnose answers (the server decides
//! everything; this prints).

use crate::config::{
    DiagnoseAuthority, DiagnoseEvidenceArgs, DiagnoseProvider, DiagnoseSymptom, OutputFormat,
};
use crate::error::BoxError;
use crate::grpc::response::proto_duration;
use crate::proto::{self, DiagnoseRequest, diagnose_evidence, lookup_request::Target};

use super::connect::Server;
use super::failure::OpsFailure;
use super::render;

fn duration(value: Option<std::time::Duration>) -> Option<pbjson_types::Duration> {
    value
        .and_then(|value| chrono::TimeDelta::from_std(value).ok())
        .map(proto_duration)
}

fn fingerprint(hex: &str) -> Result<Vec<u8>, OpsFailure> {
    let valid = hex.len() == 64 && hex.bytes().all(|byte| byte.is_ascii_hexdigit());
    if !valid {
        return Err(OpsFailure::usage("--fingerprint takes 64 hex digits"));
    }
    (0..64)
        .step_by(2)
        .map(|at| {
            u8::from_str_radix(&hex[at..at + 2], 16)
                .map_err(|_| OpsFailure::usage("--fingerprint takes 64 hex digits"))
        })
        .collect()
}

/// The request the flags describe.
pub(super) fn request(
    target: Target,
    tenant: String,
    args: DiagnoseEvidenceArgs,
) -> Result<DiagnoseRequest, OpsFailure> {
    let symptom = match args.symptom {
        None => proto::Symptom::Unspecified,
        Some(DiagnoseSymptom::Timeout) => proto::Symptom::TimeoutBeforeResponse,
        Some(DiagnoseSymptom::ErrorStatus) => proto::Symptom::ErrorStatus,
        Some(DiagnoseSymptom::ConcurrentDuplicates) => proto::Symptom::ConcurrentDuplicates,
        Some(DiagnoseSymptom::Stuck) => proto::Symptom::StuckInProgress,
        Some(DiagnoseSymptom::DuplicateEffect) => proto::Symptom::DuplicateEffect,
        Some(DiagnoseSymptom::FrequentConflicts) => proto::Symptom::FrequentConflicts,
        Some(DiagnoseSymptom::StoreGrowing) => proto::Symptom::StoreGrowing,
    };
    let request_identity = match (args.json_payload, args.fingerprint) {
        (Some(json), _) => Some(diagnose_evidence::RequestIdentity::JsonPayload(json)),
        (None, Some(hex)) => Some(diagnose_evidence::RequestIdentity::Fingerprint(
            fingerprint(&hex)?,
        )),
        (None, None) => None,
    };
    let provider = match args.provider {
        None => proto::ProviderFinding::Unspecified,
        Some(DiagnoseProvider::Found) => proto::ProviderFinding::EffectFound,
        Some(DiagnoseProvider::NotFound) => proto::ProviderFinding::NoEffect,
        Some(DiagnoseProvider::FoundMoreThanOnce) => {
            proto::ProviderFinding::EffectFoundMoreThanOnce
        }
    };
    let authority = match args.authority {
        None => proto::Authority::Unspecified,
        Some(DiagnoseAuthority::ReadOnly) => proto::Authority::ReadOnly,
        Some(DiagnoseAuthority::Retry) => proto::Authority::Retry,
        Some(DiagnoseAuthority::Reconcile) => proto::Authority::Reconcile,
    };
    let target = match target {
        Target::Scope(scope) => proto::diagnose_request::Target::Scope(scope),
        Target::OperationId(id) => proto::diagnose_request::Target::OperationId(id),
    };
    Ok(DiagnoseRequest {
        target: Some(target),
        tenant,
        evidence: Some(proto::DiagnoseEvidence {
            symptom: symptom.into(),
            status_code: args.status_code.unwrap_or_default(),
            error_reason: args.error_reason.unwrap_or_default(),
            request_identity,
            new_key_for_retry: args.new_key_for_retry,
            provider_finding: provider.into(),
            provider_looked_ago: duration(args.provider_looked_ago),
            observed_ago: duration(args.observed_ago),
            notes: args.notes.unwrap_or_default(),
        }),
        constraints: Some(proto::DiagnoseConstraints {
            authority: authority.into(),
            reversible_only: args.reversible_only,
            attempt_budget: args.attempt_budget,
            wait_budget: duration(args.wait_budget),
        }),
        success_criterion: args.success_criterion.unwrap_or_default(),
        context: args.context.unwrap_or_default(),
    })
}

pub(super) async fn run(
    server: &mut Server,
    request: DiagnoseRequest,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let request = server.request(request);
    let response = server
        .client
        .diagnose(request)
        .await
        .map_err(|status| OpsFailure::from_status("Diagnose", &status))?
        .into_inner();
    match output {
        OutputFormat::Json => render::print_json(&serde_json::to_value(&response)?),
        OutputFormat::Table => {
            print(&response);
            Ok(())
        }
    }
}

fn name(debug: impl std::fmt::Debug) -> String {
    format!("{debug:?}")
}

fn print(response: &proto::DiagnoseResponse) {
    let diagnosis = response.diagnosis.clone().unwrap_or_default();
    let confidence = response.confidence.clone().unwrap_or_default();
    render::print_fields(&[
        ("verdict", name(response.verdict())),
        ("cause", name(diagnosis.cause())),
        ("layer", name(diagnosis.layer())),
        (
            "confidence",
            format!("{} ({})", confidence.score, name(confidence.level())),
        ),
    ]);
    println!("\n{}", diagnosis.meaning);
    for also in &response.also {
        println!("also: {:?}: {}", also.cause(), also.meaning);
    }
    if !response.missing.is_empty() {
        println!("\nESCALATE — missing:");
        for missing in &response.missing {
            println!("  - {missing}");
        }
    }
    println!("\nplan:");
    for (number, step) in response.plan.iter().enumerate() {
        let needs = if step.needs_scope.is_empty() {
            String::new()
        } else {
            format!(" [needs {}]", step.needs_scope)
        };
        let undo = if step.reversible {
            ""
        } else {
            " [cannot be undone]"
        };
        println!(
            "  {}. {:?}: {}{needs}{undo}",
            number + 1,
            step.kind(),
            step.action
        );
    }
    println!("\nverification:");
    for check in &response.verification {
        println!(
            "  - {}\n      yes: {}\n      no:  {}",
            check.check, check.if_true, check.if_false
        );
    }
    println!("\nobservations:");
    for observation in &confidence.observations {
        println!(
            "  {:+4} {:?}: {}",
            observation.weight,
            observation.source(),
            observation.detail
        );
    }
    if let Some(handoff) = &response.handoff {
        println!("\nhandoff:");
        render::print_fields(&[
            ("operation_id", handoff.operation_id.clone()),
            ("state", name(handoff.state())),
            ("fingerprint", handoff.fingerprint.clone()),
            ("fingerprint mode", handoff.fingerprint_mode.clone()),
            ("policy", handoff.policy.clone()),
            ("effect", handoff.effect_atomicity.clone()),
            ("effect count", handoff.effect_count_evidence.clone()),
        ]);
        for line in &handoff.history_summary {
            println!("  {line}");
        }
    }
}

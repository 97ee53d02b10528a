//! Diagnose: reads what idemd holds about one operation (the record, its
//! whole history, the new-key watch's counts) and hands it, with the
//! caller's evidence, to the domain's map. Reads only; nothing of the
//! evidence is kept.

use chrono::{DateTime, TimeDelta, Utc};

use super::IdempotencyService;
use crate::domain::diagnose::{self, DiagnoseCommand, Facts, Granted, Report, Verdict};
use crate::domain::{Error, HistoryPage, OperationRecord, Result, Target, TenantId};

/// What the map is told beside the operation: the policy in force for its
/// name and the server's bounds.
#[derive(Debug, Clone, Copy)]
pub struct DiagnoseContext {
    pub server_max_retention: TimeDelta,
    pub clock_margin: TimeDelta,
    /// The credential's scopes, which bound the plan.
    pub granted: Granted,
}

/// A diagnosis, and the operation it is about (when one is stored).
#[derive(Debug, Clone)]
pub struct Diagnosed {
    pub report: Report,
    pub record: Option<OperationRecord>,
}

/// Where the evidence's ages are placed when nothing is stored (no database
/// time was read): only differences between them matter then.
const NOTHING_STORED_ANCHOR: DateTime<Utc> = DateTime::<Utc>::UNIX_EPOCH;

/// Every history entry fits one read: histories are capped (the server's
/// history cap, default 100) and coalesce.
const WHOLE_HISTORY: u32 = 1000;

impl IdempotencyService {
    pub async fn diagnose(
        &self,
        tenant: TenantId,
        command: &DiagnoseCommand,
        context: DiagnoseContext,
        retention_ceiling: impl Fn(&str) -> Option<TimeDelta>,
    ) -> Result<Diagnosed> {
        let page = HistoryPage {
            after: 0,
            limit: WHOLE_HISTORY,
            of: None,
        };
        let found = self
            .timed("find", self.store.find(tenant, &command.target, Some(page)))
            .await?;
        let scope = match (&command.target, &found) {
            (_, Some(found)) => found.record.scope.clone(),
            (Target::Scope(scope), None) => scope.clone(),
            // An id names an operation; another tenant's is just as absent.
            (Target::Id(_), None) => return Err(Error::NotFound),
        };
        let now = found
            .as_ref()
            .map_or(NOTHING_STORED_ANCHOR + TimeDelta::days(365), |found| {
                found.now
            });
        let same_request = found.as_ref().and_then(|found| {
            self.new_keys
                .same_request(tenant, &scope.operation, found.record.fingerprint)
        });
        let facts = Facts {
            scope: &scope,
            record: found.as_ref().map(|found| &found.record),
            history: found.as_ref().map_or(&[], |found| &found.history),
            now,
            clock_margin: context.clock_margin,
            same_request_keys: same_request.as_ref().map_or(0, |same| same.keys),
            suspected_new_key_retry: same_request.as_ref().is_some_and(|same| same.suspected),
            retention_ceiling: retention_ceiling(&scope.operation),
            server_max_retention: context.server_max_retention,
        };
        let evidence = command.evidence(now);
        let report = diagnose::diagnose(&facts, &evidence, &command.candidates);
        if report.verdict == Verdict::Diagnosed
            && let Err(stop) = diagnose::check(&report.plan, context.granted, &command.constraints)
        {
            return Err(Error::PlanStopped {
                stop,
                cause: report.diagnosis.cause,
                operation_id: found.as_ref().map(|found| found.record.operation_id),
            });
        }
        Ok(Diagnosed {
            report,
            record: found.map(|found| found.record),
        })
    }
}

//! The dashboard (this replica's counters, and the tenant's unresolved
//! operations by age) and the conflicts page (from the database).

use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::HeaderMap;
use axum::response::Response;

use crate::auth::Scope;
use crate::console::counters::{Whose, sum_by, total};
use crate::console::pages::dashboard::{AgeBand, Counter, Dashboard, dashboard_page};
use crate::console::pages::lists::conflicts_page;
use crate::proto::{self, ListHoldsRequest, ListUnresolvedRequest};
use crate::support::format;

use super::{AGE_BAND_READ, Shared, SignedIn, html, refused, shown_now, sign_in};

/// Whose counters a viewer may see: an admin every tenant's; anyone else
/// only its own tenant's, which needs the tenant label on the metrics.
fn whose_counters<'a>(signed_in: &SignedIn, own: &'a str, labelled: bool) -> Option<Whose<'a>> {
    if signed_in.principal.scopes.contains(Scope::Admin) {
        Some(Whose::Everyone)
    } else if labelled {
        Some(Whose::Tenant(own))
    } else {
        None
    }
}

pub(in crate::console) async fn dashboard(State(console): Shared, headers: HeaderMap) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let own = signed_in.principal.tenant.0.to_string();
    let whose = whose_counters(&signed_in, &own, console.metrics.labels_tenants());
    let text = console.metrics.render();
    let counters = whose.map_or_else(Vec::new, |whose| counters(&text, whose));
    let counters_scope = match whose {
        Some(Whose::Everyone) => "Every tenant, on this replica, since it started.".to_owned(),
        Some(Whose::Tenant(_)) => format!("Tenant {own}, on this replica, since it started."),
        None => String::new(),
    };
    let request = ListUnresolvedRequest {
        operation: String::new(),
        page_size: AGE_BAND_READ,
        page_token: String::new(),
    };
    let page = match console
        .api
        .list_unresolved(&signed_in.principal, request)
        .await
    {
        Ok(page) => page,
        Err(refusal) => return refused(&signed_in, "", "Dashboard", &refusal),
    };
    let holds = match console
        .api
        .list_holds(&signed_in.principal, ListHoldsRequest::default())
        .await
    {
        Ok(listed) => listed.holds,
        Err(refusal) => return refused(&signed_in, "", "Dashboard", &refusal),
    };
    let dashboard = Dashboard {
        counters,
        counters_scope,
        unresolved: age_bands(&page.operations),
        unresolved_truncated: !page.next_page_token.is_empty(),
        holds,
    };
    html(
        StatusCode::OK,
        dashboard_page(&signed_in.viewer(), &dashboard),
    )
}

fn counters(text: &str, whose: Whose<'_>) -> Vec<Counter> {
    let claims = sum_by(text, "idemd_claims_total", "outcome", &[], whose);
    let claim = |outcome: &str| claims.get(outcome).copied().unwrap_or(0.0);
    vec![
        Counter {
            name: "new",
            value: claim("acquired"),
            meaning: "Claims that started an operation",
        },
        Counter {
            name: "replayed",
            value: claim("replayed"),
            meaning: "Claims answered with the stored outcome",
        },
        Counter {
            name: "conflicts",
            value: claim("conflict"),
            meaning: "Claims refused: the key with another payload",
        },
        Counter {
            name: "takeovers",
            value: claim("reconcile_first"),
            meaning: "Claims that took over an expired lease (ReconcileFirst)",
        },
        Counter {
            name: "pending",
            value: claim("pending"),
            meaning: "Claims told to wait: another attempt holds the lease",
        },
        Counter {
            name: "needs reconciliation",
            value: claim("needs_reconciliation"),
            meaning: "Claims refused until someone reconciles",
        },
        Counter {
            name: "stale writes refused",
            value: total(text, "idemd_stale_writes_refused_total", &[], whose),
            meaning: "Writes with a superseded fence",
        },
        Counter {
            name: "reconciliations",
            value: total(text, "idemd_reconciliations_total", &[], whose),
            meaning: "Operations settled from outside evidence",
        },
    ]
}

fn age_bands(operations: &[proto::Operation]) -> Vec<AgeBand> {
    const BANDS: [(&str, i64); 4] = [
        ("under 5 minutes", 300),
        ("5 minutes to 1 hour", 3600),
        ("1 hour to 1 day", 86_400),
        ("over 1 day", i64::MAX),
    ];
    let now = shown_now();
    let mut counts = [0usize; BANDS.len()];
    for operation in operations {
        let age = format::timestamp(operation.created_at.as_ref())
            .map_or(0, |created| (now - created).num_seconds());
        if let Some(band) = BANDS.iter().position(|(_, below)| age < *below) {
            counts[band] += 1;
        }
    }
    BANDS
        .iter()
        .zip(counts)
        .map(|((label, _), count)| AgeBand { label, count })
        .collect()
}

pub(in crate::console) async fn conflicts(State(console): Shared, headers: HeaderMap) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let request = proto::ListOperationsRequest {
        filter: crate::console::conflicts::FILTER.to_owned(),
        page_size: crate::console::conflicts::READ,
        page_token: String::new(),
        order: proto::list_operations_request::Order::NewestFirst.into(),
    };
    let page = match console
        .api
        .list_operations(&signed_in.principal, request)
        .await
    {
        Ok(page) => page,
        Err(refusal) => return refused(&signed_in, "", "Conflicts", &refusal),
    };
    let groups = crate::console::conflicts::groups(&page.operations, shown_now());
    let whom = if signed_in.principal.scopes.contains(Scope::Admin) {
        "every tenant"
    } else {
        "this tenant"
    };
    let note = format!(
        "From the database, for {whom}, every replica's refusals: the operations whose refused \
         Claims were counted ({} read, newest first{}), each operation's refusals placed in \
         the hour of its last one.",
        page.operations.len(),
        if page.next_page_token.is_empty() {
            ""
        } else {
            "; older ones not read"
        }
    );
    html(
        StatusCode::OK,
        conflicts_page(&signed_in.viewer(), &groups, &note),
    )
}

//! The counters that matter, from this replica's metrics, and the tenant's
//! unresolved operations by age, from the database.

use maud::{Markup, html};

use super::holds::holds_banner;
use super::layout::{Viewer, page};
use crate::proto::Hold;

/// One number with what it means.
pub struct Counter {
    pub name: &'static str,
    pub value: f64,
    pub meaning: &'static str,
}

/// Unresolved operations in one age band.
pub struct AgeBand {
    pub label: &'static str,
    pub count: usize,
}

pub struct Dashboard {
    pub counters: Vec<Counter>,
    /// Whose counters these are, in words.
    pub counters_scope: String,
    pub unresolved: Vec<AgeBand>,
    /// The queue was longer than what was read: the counts are at least.
    pub unresolved_truncated: bool,
    /// The holds in force the viewer may see (ListHolds).
    pub holds: Vec<Hold>,
}

pub fn dashboard_page(viewer: &Viewer, dashboard: &Dashboard) -> Markup {
    let total: usize = dashboard.unresolved.iter().map(|band| band.count).sum();
    let body = html! {
        (holds_banner(&dashboard.holds))
        section {
            h2 { "Unresolved, by age" }
            p { "Operations of tenant " (viewer.tenant) " waiting for reconciliation: "
                strong.unresolved-total { (total) @if dashboard.unresolved_truncated { "+" } } ". "
                a href="/unresolved" { "Work the queue →" } }
            table.bands {
                thead { tr { @for band in &dashboard.unresolved { th { (band.label) } } } }
                tbody { tr { @for band in &dashboard.unresolved {
                    td data-count=(band.count) { (band.count) }
                } } }
            }
        }
        section {
            h2 { "Counters" }
            p.note { (dashboard.counters_scope) }
            @if dashboard.counters.is_empty() {
                p.empty { "Not shown: this replica's metrics do not carry the tenant label, so they count every tenant; only an admin sees them." }
            } @else {
                div.cards {
                    @for counter in &dashboard.counters {
                        div.card {
                            div.value { (counter.value) }
                            div.name { (counter.name) }
                            div.meaning { (counter.meaning) }
                        }
                    }
                }
            }
        }
    };
    page("Dashboard", viewer, "", body)
}

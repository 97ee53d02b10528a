//! The console's links, built in one place: an operation of another tenant
//! (an admin's view) carries `?tenant=NAME`, which the API checks like any
//! caller's tenant name; query values are URL-encoded.

use serde::Serialize;

/// A query string of typed fields; empty fields are left out.
pub fn query(fields: &[(&str, &str)]) -> String {
    let present: Vec<(&str, &str)> = fields
        .iter()
        .copied()
        .filter(|(_, value)| !value.is_empty())
        .collect();
    encoded(&present)
}

pub fn encoded(fields: &impl Serialize) -> String {
    serde_urlencoded::to_string(fields).unwrap_or_default()
}

fn with_query(path: String, fields: &[(&str, &str)]) -> String {
    let query = query(fields);
    if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    }
}

/// One operation's page; `tenant` empty: the viewer's own.
pub fn operation(id: &str, tenant: &str) -> String {
    with_query(format!("/operations/{id}"), &[("tenant", tenant)])
}

/// One operation's page after an action, saying what was done.
pub fn operation_after(id: &str, tenant: &str, done: &str) -> String {
    with_query(
        format!("/operations/{id}"),
        &[("tenant", tenant), ("done", done)],
    )
}

/// Reconciling one operation.
pub fn reconcile(id: &str, tenant: &str) -> String {
    with_query(format!("/operations/{id}/reconcile"), &[("tenant", tenant)])
}

/// The operations a filter finds.
pub fn filtered(filter: &str) -> String {
    with_query("/operations".to_owned(), &[("filter", filter)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_carry_the_tenant_only_when_named_and_encode_what_they_carry() {
        assert_eq!(operation("0192", ""), "/operations/0192");
        assert_eq!(
            operation("0192", "tenant b&c"),
            "/operations/0192?tenant=tenant+b%26c"
        );
        assert_eq!(
            operation_after("0192", "", "reconciled"),
            "/operations/0192?done=reconciled"
        );
        assert_eq!(
            reconcile("0192", "t"),
            "/operations/0192/reconcile?tenant=t"
        );
        assert_eq!(
            filtered("op:payments.*"),
            "/operations?filter=op%3Apayments.*"
        );
    }
}

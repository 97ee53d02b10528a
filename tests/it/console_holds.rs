//! Holds on the web console (issue 23, item 3): the holds page lists what
//! ListHolds lists for the signed-in credential (a reconciler its own
//! tenant's, an admin every tenant's), the dashboard counts them, an
//! operation page says when its name or tenant is held, and an admin's Hold
//! and Release from the console need the session's CSRF token, the
//! console's origin and a reason, and are audited as the credential's. Over
//! real HTTP against a real console and server; what is counted is what the
//! server then holds (ListHolds, a Claim told HELD, the audit log).

use std::net::SocketAddr;

use idemd::console::Console;
use idemd::proto;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::harness::*;

store_tests!(
    each_session_sees_the_holds_its_scope_lists_and_held_operations_say_so,
    an_admin_holds_and_releases_from_the_console_only_with_csrf_and_a_reason,
);

const CHARGE: &str = "payments.charge";
const SHIP: &str = "orders.ship";
/// Markup in the reason: every page must show it as text.
const REASON: &str = "duplicates <script>still</script> & \"occur\": incident 42";
const REASON_ESCAPED: &str =
    "duplicates &lt;script&gt;still&lt;/script&gt; &amp; &quot;occur&quot;: incident 42";

/// One HTTP/1.1 exchange with the console; the status and the whole answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) text: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        let head = self.text.split("\r\n\r\n").next().unwrap_or_default();
        head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    /// How many times `needle` occurs in the answer.
    fn count(&self, needle: &str) -> usize {
        self.text.matches(needle).count()
    }
}

pub(crate) struct Browser {
    address: SocketAddr,
    cookie: String,
}

async fn exchange(address: SocketAddr, request: String) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).await.expect("response read");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("an HTTP answer: {text}"));
    Answer { status, text }
}

fn form(fields: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(fields).expect("form encoded")
}

fn post(address: SocketAddr, path: &str, cookie: &str, origin: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nOrigin: {origin}\r\n\
         Cookie: {cookie}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

impl Browser {
    pub(crate) async fn sign_in(address: SocketAddr, token: &str) -> Self {
        let origin = format!("http://{address}");
        let answer = exchange(
            address,
            post(address, "/login", "", &origin, &form(&[("token", token)])),
        )
        .await;
        assert_eq!(answer.status, 303, "{}", answer.text);
        let cookie = answer
            .header("set-cookie")
            .and_then(|value| value.split(';').next())
            .unwrap_or_else(|| panic!("a session cookie: {}", answer.text))
            .to_owned();
        Self { address, cookie }
    }

    pub(crate) async fn get(&self, path: &str) -> Answer {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nCookie: {}\r\n\r\n",
            self.address, self.cookie
        );
        exchange(self.address, request).await
    }

    async fn post_from(&self, origin: &str, path: &str, fields: &[(&str, &str)]) -> Answer {
        let request = post(self.address, path, &self.cookie, origin, &form(fields));
        exchange(self.address, request).await
    }

    async fn post(&self, path: &str, fields: &[(&str, &str)]) -> Answer {
        let origin = format!("http://{}", self.address);
        self.post_from(&origin, path, fields).await
    }

    /// The session's CSRF token, as its pages carry it.
    async fn csrf(&self) -> String {
        let page = self.get("/holds").await;
        let marker = "name=\"csrf\" value=\"";
        let start = page
            .text
            .find(marker)
            .unwrap_or_else(|| panic!("a CSRF field: {}", page.text))
            + marker.len();
        let end = page.text[start..].find('"').expect("the field's end") + start;
        page.text[start..end].to_owned()
    }
}

pub(crate) struct Served {
    pub(crate) address: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub(crate) async fn serve_console(world: &World) -> Served {
    let console = Console::new(
        world.server.application.api.clone(),
        world.server.application.authenticator.clone(),
        world.server.application.service.metrics().clone(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let stop = CancellationToken::new();
    let task = tokio::spawn(idemd::console::serve(listener, console, stop.clone()));
    Served {
        address,
        stop,
        task,
    }
}

impl Served {
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        self.task
            .await
            .expect("console task")
            .expect("console served");
    }
}

async fn holds_in_force(client: &mut Client, admin: &str) -> Vec<proto::Hold> {
    client
        .list_holds(authorized(admin, proto::ListHoldsRequest::default()))
        .await
        .expect("list holds")
        .into_inner()
        .holds
}

fn hold_request(tenant: &str, operation: &str) -> proto::HoldRequest {
    proto::HoldRequest {
        tenant: tenant.into(),
        operation: operation.into(),
        reason: REASON.into(),
        retry_after: millis(5_000),
    }
}

/// The console's Hold form, filled in.
fn hold_fields<'a>(csrf: &'a str, reason: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("csrf", csrf),
        ("what", "operation"),
        ("operation", CHARGE),
        ("retry_after_seconds", "7"),
        ("reason", reason),
    ]
}

/// The console's Release form of tenant A's charge hold, filled in.
fn release<'a>(csrf: &'a str, reason: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("csrf", csrf),
        ("tenant", "tenant-a"),
        ("operation", CHARGE),
        ("reason", reason),
    ]
}

/// The rows of the holds table.
fn hold_rows(page: &Answer) -> usize {
    let Some(table) = page.text.split("<table class=\"holds\">").nth(1) else {
        return 0;
    };
    let rows = table.split("<tbody>").nth(1).unwrap_or_default();
    let body = rows.split("</tbody>").next().unwrap_or_default();
    body.matches("<tr>").count()
}

async fn each_session_sees_the_holds_its_scope_lists_and_held_operations_say_so(backend: Backend) {
    let world = World::start(backend).await;
    let reconciler = world.tenant_a.clone();
    let admin = add_token(
        world.store.as_ref(),
        "tenant-a",
        "support-lead",
        "reconcile,admin",
    )
    .await;
    let mut client = world.client().await;

    // Operations started before the holds: tenant A's held name and its
    // unheld one, and tenant B's.
    let charge = claim_owned(&mut client, &reconciler, claim_json(CHARGE, "c-1", "{}")).await;
    let ship = claim_owned(&mut client, &reconciler, claim_json(SHIP, "s-1", "{}")).await;
    let other = claim_owned(&mut client, &world.tenant_b, claim_json(SHIP, "b-1", "{}")).await;

    // Held through the API, as `idemd ops hold` does: tenant A's charge
    // name, and the whole of tenant B.
    for request in [hold_request("", CHARGE), hold_request("tenant-b", "")] {
        client
            .hold(authorized(&admin, request))
            .await
            .expect("hold");
    }
    assert_eq!(holds_in_force(&mut client, &admin).await.len(), 2);

    let served = serve_console(&world).await;
    let staff = Browser::sign_in(served.address, &reconciler).await;
    let lead = Browser::sign_in(served.address, &admin).await;

    // The reconciler: its own tenant's hold only, the reason as text, and
    // no forms to change them.
    let page = staff.get("/holds").await;
    assert_eq!(page.status, 200, "{}", page.text);
    assert_eq!(hold_rows(&page), 1, "{}", page.text);
    assert!(page.text.contains(CHARGE), "{}", page.text);
    assert!(page.text.contains("token:support-lead"), "{}", page.text);
    assert_eq!(page.count(REASON_ESCAPED), 1, "{}", page.text);
    assert!(!page.text.contains("<script>still"), "{}", page.text);
    assert!(!page.text.contains("tenant-b"), "{}", page.text);
    assert!(!page.text.contains("action=\"/holds\""), "{}", page.text);
    assert!(
        !page.text.contains("action=\"/holds/release\""),
        "{}",
        page.text
    );
    let dashboard = staff.get("/").await;
    assert!(
        dashboard.text.contains("data-count=\"1\""),
        "{}",
        dashboard.text
    );
    assert!(
        dashboard.text.contains("href=\"/holds\""),
        "{}",
        dashboard.text
    );

    // The admin: every tenant's, each with its Release form, and the Hold form.
    let page = lead.get("/holds").await;
    assert_eq!(hold_rows(&page), 2, "{}", page.text);
    assert!(page.text.contains("tenant-b"), "{}", page.text);
    assert!(page.text.contains("whole tenant"), "{}", page.text);
    assert_eq!(page.count("action=\"/holds/release\""), 2, "{}", page.text);
    assert_eq!(page.count("action=\"/holds\""), 1, "{}", page.text);
    let dashboard = lead.get("/").await;
    assert!(
        dashboard.text.contains("data-count=\"2\""),
        "{}",
        dashboard.text
    );

    // The operation pages: the held name says so, the unheld one does not.
    let notice = "New owners of <code>payments.charge</code> are held since";
    let held = staff
        .get(&format!("/operations/{}", charge.operation_id))
        .await;
    assert_eq!(held.status, 200, "{}", held.text);
    assert_eq!(held.count(notice), 1, "{}", held.text);
    assert!(held.text.contains("by token:support-lead"), "{}", held.text);
    assert!(held.text.contains(REASON_ESCAPED), "{}", held.text);
    assert!(
        held.text.contains("replays and reconciliation go on"),
        "{}",
        held.text
    );
    let unheld = staff
        .get(&format!("/operations/{}", ship.operation_id))
        .await;
    assert_eq!(unheld.status, 200, "{}", unheld.text);
    assert_eq!(unheld.count("New owners of"), 0, "{}", unheld.text);
    // The admin's view of its own tenant's: the same, and tenant B's whole
    // hold does not spill onto tenant A's names.
    let held = lead
        .get(&format!("/operations/{}", charge.operation_id))
        .await;
    assert_eq!(held.count(notice), 1, "{}", held.text);
    let unheld = lead
        .get(&format!("/operations/{}", ship.operation_id))
        .await;
    assert_eq!(unheld.count("New owners of"), 0, "{}", unheld.text);
    // Tenant B's operation, on its behalf: its whole tenant is held.
    let whole = lead
        .get(&format!(
            "/operations/{}?tenant=tenant-b",
            other.operation_id
        ))
        .await;
    assert_eq!(whole.status, 200, "{}", whole.text);
    assert_eq!(
        whole.count("New owners of every operation of tenant tenant-b"),
        1,
        "{}",
        whole.text
    );

    served.stop().await;
}

async fn an_admin_holds_and_releases_from_the_console_only_with_csrf_and_a_reason(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let reconciler = world.tenant_a.clone();
    let admin = add_token(
        world.store.as_ref(),
        "tenant-a",
        "support-lead",
        "reconcile,admin",
    )
    .await;
    let mut client = world.client().await;
    let served = serve_console(&world).await;
    let staff = Browser::sign_in(served.address, &reconciler).await;
    let lead = Browser::sign_in(served.address, &admin).await;
    let csrf = lead.csrf().await;
    let csrf = csrf.as_str();

    // Refused, each changing nothing: a reconciler (the API's scope rule),
    // no CSRF token, another origin, no reason, an empty name.
    let staff_csrf = staff.csrf().await;
    let staff_csrf = staff_csrf.as_str();
    let refusals = [
        staff.post("/holds", &hold_fields(staff_csrf, "why")).await,
        lead.post("/holds", &hold_fields("", "why")).await,
        lead.post_from("http://evil.example", "/holds", &hold_fields(csrf, "why"))
            .await,
        lead.post("/holds", &hold_fields(csrf, "")).await,
        lead.post(
            "/holds",
            &[
                ("csrf", csrf),
                ("what", "operation"),
                ("operation", ""),
                ("reason", "why"),
            ],
        )
        .await,
    ];
    let statuses: Vec<u16> = refusals.iter().map(|answer| answer.status).collect();
    assert_eq!(statuses, [403, 403, 403, 400, 400], "{refusals:?}");
    assert!(refusals[1].text.contains("CSRF_TOKEN_INVALID"));
    assert!(refusals[2].text.contains("CSRF_TOKEN_INVALID"));
    assert!(refusals[3].text.contains("reason"), "{}", refusals[3].text);
    assert!(holds_in_force(&mut client, &admin).await.is_empty());
    let fresh = client
        .claim(authorized(&reconciler, claim_json(CHARGE, "before", "{}")))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&fresh), "acquired");

    // Held from the console: in force, a new Claim is told HELD with the
    // form's retry_after and nothing is created.
    let held = lead.post("/holds", &hold_fields(csrf, REASON)).await;
    assert_eq!(held.status, 303, "{}", held.text);
    assert_eq!(held.header("location"), Some("/holds?done=held"));
    let holds = holds_in_force(&mut client, &admin).await;
    assert_eq!(holds.len(), 1, "{holds:?}");
    assert_eq!(
        (
            holds[0].operation.as_str(),
            holds[0].reason.as_str(),
            holds[0].held_by.as_str()
        ),
        (CHARGE, REASON, "token:support-lead")
    );
    let waiting = client
        .claim(authorized(
            &reconciler,
            claim_json(CHARGE, "while-held", "{}"),
        ))
        .await
        .expect("claim")
        .into_inner();
    let Some(proto::claim_response::Outcome::Pending(pending)) = &waiting.outcome else {
        panic!("held: {waiting:?}");
    };
    assert_eq!(pending.reason(), proto::PendingReason::Held);
    assert_eq!(pending.retry_after, millis(7_000));

    // Held again: the first hold stays as it was set, and nothing more is
    // audited (the audit log below has one hold.set).
    let again = lead
        .post("/holds", &hold_fields(csrf, "another reason"))
        .await;
    assert_eq!(again.status, 303, "{}", again.text);
    assert_eq!(again.header("location"), Some("/holds?done=already_held"));
    let holds = holds_in_force(&mut client, &admin).await;
    assert_eq!(
        holds
            .iter()
            .map(|hold| hold.reason.as_str())
            .collect::<Vec<_>>(),
        [REASON]
    );

    // Release: refused without a reason or a token, then done.
    let no_reason = lead.post("/holds/release", &release(csrf, "")).await;
    assert_eq!(no_reason.status, 400, "{}", no_reason.text);
    let forged = lead.post("/holds/release", &release("", "why")).await;
    assert_eq!(forged.status, 403, "{}", forged.text);
    let by_staff = staff
        .post("/holds/release", &release(staff_csrf, "why"))
        .await;
    assert_eq!(by_staff.status, 403, "{}", by_staff.text);
    assert_eq!(holds_in_force(&mut client, &admin).await.len(), 1);
    let released = lead
        .post("/holds/release", &release(csrf, "drained and reconciled"))
        .await;
    assert_eq!(released.status, 303, "{}", released.text);
    assert!(holds_in_force(&mut client, &admin).await.is_empty());
    let after = client
        .claim(authorized(
            &reconciler,
            claim_json(CHARGE, "while-held", "{}"),
        ))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&after), "acquired");

    // Audited once each, as the console's credential, with the reasons.
    let audit = world
        .store
        .credentials()
        .audit_log(Some("tenant-a"), 100)
        .await
        .expect("audit");
    let holds: Vec<(&str, Option<&str>, Option<&str>, &str)> = audit
        .iter()
        .filter(|entry| entry.action.starts_with("hold."))
        .map(|entry| {
            (
                entry.action.as_str(),
                entry.target.as_deref(),
                entry.reason.as_deref(),
                entry.actor.as_str(),
            )
        })
        .collect();
    assert_eq!(
        holds,
        [
            ("hold.set", Some(CHARGE), Some(REASON), "token:support-lead"),
            (
                "hold.release",
                Some(CHARGE),
                Some("drained and reconciled"),
                "token:support-lead"
            ),
        ]
    );
    served.stop().await;
}

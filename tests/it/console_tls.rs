//! The web console over HTTPS, on a real `idemd serve` listening on every
//! address with a certificate for a real-looking name: a client trusting
//! only the test CA signs in, reads a page, is refused a reconciliation
//! without the CSRF token or from another origin (and nothing changes), then
//! reconciles; every answer carries HSTS; a request naming a host the
//! certificate does not hold (DNS rebinding) is refused; HTTP/2 works; the
//! certificate reloads. And the start-up refusals: a non-loopback console
//! without TLS, one TLS flag without the other.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use idemd::proto;
use idemd::proto::claim_response::Outcome;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use crate::harness::{
    Backend, ProcessData, claim_json, claim_owned, fail_unknown, free_port, fresh_uuid,
    operation_by_id, store_tests,
};
use crate::mtls::pki::{self, Ca};

/// The name the console's certificate holds (resolved by hand: the client
/// connects to 127.0.0.1 and names it in SNI and Host).
const NAME: &str = "console.idemd.test";
/// Added to the certificate by the reload.
const SECOND_NAME: &str = "support.idemd.test";
const HSTS: &str = "max-age=31536000";

/// A raw HTTP/1.1 client over TLS that trusts only the test CA.
struct Https {
    addr: SocketAddr,
    connector: TlsConnector,
}

/// A response: the status, the head's lines (names lowercased) and the body.
struct Answer {
    status: u16,
    head: Vec<(String, String)>,
    body: String,
    raw: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .iter()
            .find(|(found, _)| found == name)
            .map(|(_, value)| value.as_str())
    }
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.raw)
    }
}

impl Https {
    fn new(addr: SocketAddr, ca: &Ca) -> Self {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca.pem().as_bytes()).expect("CA pem"))
            .expect("CA");
        let mut config = ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self {
            addr,
            connector: TlsConnector::from(Arc::new(config)),
        }
    }

    /// One request on a new connection to `sni`, with `Host: host:port`.
    async fn request(
        &self,
        (sni, host): (&str, &str),
        method_and_path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        self.try_request((sni, host), method_and_path, headers, body)
            .await
            .unwrap_or_else(|error| panic!("no handshake the test CA vouches for: {error}"))
    }

    /// The same; Err when the server's certificate is not valid for `sni`.
    async fn try_request(
        &self,
        (sni, host): (&str, &str),
        method_and_path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> std::io::Result<Answer> {
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .expect("connect");
        let mut tls = self
            .connector
            .connect(ServerName::try_from(sni.to_owned()).expect("a name"), tcp)
            .await?;
        let mut request = format!(
            "{method_and_path} HTTP/1.1\r\nHost: {host}:{}\r\nConnection: close\r\n",
            self.addr.port()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() {
            request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        tls.write_all(request.as_bytes()).await.expect("sent");
        let mut raw = Vec::new();
        // The server may close without close_notify after the response.
        let _ = tls.read_to_end(&mut raw).await;
        Ok(parse(String::from_utf8_lossy(&raw).into_owned()))
    }

    async fn get(&self, host: &str, path: &str, cookie: Option<&str>) -> Answer {
        let headers: Vec<(&str, &str)> = cookie
            .map(|cookie| ("Cookie", cookie))
            .into_iter()
            .collect();
        self.request((host, host), &format!("GET {path}"), &headers, "")
            .await
    }

    /// A form POSTed to `NAME` from `origin` (a browser's headers).
    async fn post(
        &self,
        path: &str,
        origin: &str,
        cookie: Option<&str>,
        form: &impl serde::Serialize,
    ) -> Answer {
        let mut headers = vec![("Origin", origin), ("Sec-Fetch-Site", "same-origin")];
        if let Some(cookie) = cookie {
            headers.push(("Cookie", cookie));
        }
        let body = serde_urlencoded::to_string(form).expect("a form");
        self.request((NAME, NAME), &format!("POST {path}"), &headers, &body)
            .await
    }
}

fn parse(raw: String) -> Answer {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let head = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Answer {
        status,
        head,
        body: body.to_owned(),
        raw: raw.clone(),
    }
}

/// The value of the page's first hidden CSRF field.
fn csrf_of(page: &str) -> String {
    let start = page
        .find(r#"name="csrf" value=""#)
        .unwrap_or_else(|| panic!("a CSRF field: {page}"))
        + r#"name="csrf" value=""#.len();
    page[start..]
        .split('"')
        .next()
        .expect("its value")
        .to_owned()
}

fn write_pair(directory: &Path, pair: &pki::Pair) -> (String, String) {
    let cert = pki::write(directory, "console.crt", &pair.cert);
    let key = pki::write(directory, "console.key", &pair.key);
    (cert.display().to_string(), key.display().to_string())
}

async fn the_console_is_served_over_https_on_any_address(backend: Backend) {
    let directory = std::env::temp_dir().join(format!("idemd-console-tls-{}", fresh_uuid()));
    std::fs::create_dir_all(&directory).expect("temp dir");
    let ca = Ca::new("console CA");
    let (cert, key) = write_pair(&directory, &ca.server_for(&[NAME]));
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let port = free_port();
    let server = data
        .serve_with(
            &[],
            &[
                // Every address: with TLS the console may leave loopback.
                ("IDEMD_CONSOLE_LISTEN", format!("0.0.0.0:{port}")),
                ("IDEMD_CONSOLE_TLS_CERT", cert),
                ("IDEMD_CONSOLE_TLS_KEY", key),
                ("IDEMD_TLS_RELOAD_INTERVAL", "100ms".to_owned()),
            ],
        )
        .await;
    let mut client = server.client().await;
    let unknown = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "tls-1", "{}"),
    )
    .await;
    fail_unknown(&mut client, &token, &unknown).await;
    let https = Https::new(([127, 0, 0, 1], port).into(), &ca);
    let origin = format!("https://{NAME}:{port}");

    // The sign-in page, over TLS, with HSTS beside the other headers.
    let login = https.get(NAME, "/login", None).await;
    assert_eq!(login.status, 200, "{login:?}");
    assert_eq!(
        login.header("strict-transport-security"),
        Some(HSTS),
        "{login:?}"
    );
    assert!(
        login
            .header("content-security-policy")
            .is_some_and(|csp| csp.starts_with("default-src 'none'")),
        "{login:?}"
    );
    assert!(login.body.contains("<form"), "{login:?}");

    // A page of another site whose name resolves here (DNS rebinding), or a
    // loopback name the certificate does not hold: refused before anything
    // runs, HSTS still sent.
    for host in ["attacker.example", "127.0.0.1", "localhost"] {
        let answer = https.request((NAME, host), "GET /login", &[], "").await;
        assert_eq!(answer.status, 421, "{host}: {answer:?}");
        assert!(!answer.body.contains("<form"), "{answer:?}");
        assert_eq!(answer.header("strict-transport-security"), Some(HSTS));
    }

    // Signing in from another origin (even this name over plain HTTP) is
    // refused and starts no session.
    for foreign in [
        format!("http://{NAME}:{port}"),
        "https://attacker.example".to_owned(),
    ] {
        let refused = https
            .post("/login", &foreign, None, &[("token", &token)])
            .await;
        assert_eq!(refused.status, 403, "{foreign}: {refused:?}");
        assert!(refused.header("set-cookie").is_none(), "{refused:?}");
    }
    let signed_in = https
        .post("/login", &origin, None, &[("token", &token)])
        .await;
    assert_eq!(signed_in.status, 303, "{signed_in:?}");
    let set_cookie = signed_in.header("set-cookie").expect("a session cookie");
    for attribute in [
        "__Host-idemd-console=",
        "Secure",
        "HttpOnly",
        "SameSite=Strict",
        "Path=/",
    ] {
        assert!(set_cookie.contains(attribute), "{attribute}: {set_cookie}");
    }
    let cookie = set_cookie.split(';').next().expect("name=value").to_owned();

    // A page, signed in: the unknown operation is in the queue.
    let queue = https.get(NAME, "/unresolved", Some(&cookie)).await;
    assert_eq!(queue.status, 200, "{queue:?}");
    assert!(queue.body.contains(&unknown.operation_id), "{queue:?}");
    let csrf = csrf_of(&queue.body);

    let path = format!("/operations/{}/reconcile", unknown.operation_id);
    let form = |csrf: Option<&str>| {
        let mut form = vec![
            ("expected_fence", unknown.fence.to_string()),
            ("step", "apply".to_owned()),
            ("resolution", "succeeded".to_owned()),
            ("content_type", "application/json".to_owned()),
            ("body", r#"{"charge":"ch_over_tls"}"#.to_owned()),
        ];
        form.extend(csrf.map(|csrf| ("csrf", csrf.to_owned())));
        form
    };

    // Without the CSRF token, or with it from another origin: refused, and
    // the operation is untouched.
    for (origin, form) in [
        (origin.clone(), form(None)),
        ("https://attacker.example".to_owned(), form(Some(&csrf))),
        (format!("http://{NAME}:{port}"), form(Some(&csrf))),
    ] {
        let forged = https.post(&path, &origin, Some(&cookie), &form).await;
        assert_eq!(forged.status, 403, "{origin}: {forged:?}");
        assert!(forged.body.contains("CSRF_TOKEN_INVALID"), "{forged:?}");
        let found = operation_by_id(&mut client, &token, &unknown.operation_id).await;
        assert_eq!(found.state(), proto::OperationState::Unknown);
        assert_eq!(found.fence, unknown.fence);
    }

    // With it, from the console's own origin: reconciled, and the caller's
    // next Claim replays what was entered.
    let reconciled = https
        .post(&path, &origin, Some(&cookie), &form(Some(&csrf)))
        .await;
    assert_eq!(reconciled.status, 303, "{reconciled:?}");
    let replay = client
        .claim(crate::harness::authorized(
            &token,
            claim_json("payments.charge", "tls-1", "{}"),
        ))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::Completed(completed)) = replay.outcome else {
        panic!("a replay of the reconciled result: {replay:?}");
    };
    let Some(proto::completed::Outcome::Result(stored)) = completed.outcome else {
        panic!("a success result: {completed:?}");
    };
    assert_eq!(stored.body, br#"{"charge":"ch_over_tls"}"#);

    // HTTP/2 (what a browser speaks over TLS): the name comes as :authority.
    let ca_path = pki::write(&directory, "ca.crt", &ca.pem());
    let mut curl = std::process::Command::new("curl");
    curl.args(["--silent", "--http2", "--cacert"])
        .arg(&ca_path)
        .args(["--resolve", &format!("{NAME}:{port}:127.0.0.1")])
        .args([
            "--output",
            "/dev/null",
            "--write-out",
            "%{http_code} %{http_version}",
        ])
        .arg(format!("https://{NAME}:{port}/login"));
    let output = tokio::task::spawn_blocking(move || curl.output().expect("curl runs"))
        .await
        .expect("curl task");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "200 2",
        "{output:?}"
    );

    // Plain HTTP to the TLS port gets no HTTP answer.
    let mut plain = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    plain
        .write_all(format!("GET /login HTTP/1.1\r\nHost: {NAME}\r\n\r\n").as_bytes())
        .await
        .expect("sent");
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), plain.read_to_end(&mut raw)).await;
    assert!(
        !raw.starts_with(b"HTTP/"),
        "{}",
        String::from_utf8_lossy(&raw)
    );

    // A new certificate (one more name) is read again, as the API's are:
    // the new name is answered once it serves.
    let second = (SECOND_NAME, SECOND_NAME);
    let before = https.try_request(second, "GET /login", &[], "").await;
    assert!(
        before.is_err(),
        "the old certificate is not {SECOND_NAME}'s"
    );
    write_pair(&directory, &ca.server_for(&[NAME, SECOND_NAME]));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let answered = https.try_request(second, "GET /login", &[], "").await;
        if answered.is_ok_and(|answer| answer.status == 200) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate never served: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        server.log().contains("tls files reloaded"),
        "{}",
        server.log()
    );
    let _ = std::fs::remove_dir_all(&directory);
}

store_tests!(the_console_is_served_over_https_on_any_address);

/// The refusal line `idemd serve ARGS` prints, with `env`; its exit code.
fn refusal(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let data = ProcessData::embedded();
    let output = data
        .command(&[&["serve", "--listen", "127.0.0.1:0"], args].concat())
        .envs(env.iter().copied())
        .output()
        .expect("idemd runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Without TLS the console stays on loopback, and the refusal says how to
/// leave it.
#[test]
fn a_non_loopback_console_without_tls_is_refused_at_start_up() {
    let (code, stderr) = refusal(&["--console-listen", "0.0.0.0:0"], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let line = stderr
        .lines()
        .find(|line| line.starts_with("idemd: "))
        .unwrap_or_else(|| panic!("no refusal line: {stderr}"));
    for needle in [
        "loopback",
        "0.0.0.0:0",
        "--console-tls-cert",
        "--console-tls-key",
    ] {
        assert!(line.contains(needle), "{needle}: {line}");
    }
}

/// A certificate without its key, or a key without its certificate, is a
/// start-up error that names the missing one (flag or environment alike).
#[test]
fn one_console_tls_flag_alone_is_refused() {
    // (a flag, or a variable, given alone; the one the refusal must name)
    let cases = [
        (
            Some(("--console-tls-cert", "/tls/console.crt")),
            None,
            "--console-tls-key",
        ),
        (
            Some(("--console-tls-key", "/tls/console.key")),
            None,
            "--console-tls-cert",
        ),
        (
            None,
            Some(("IDEMD_CONSOLE_TLS_KEY", "/tls/console.key")),
            "--console-tls-cert",
        ),
    ];
    for (flag, variable, missing) in cases {
        let mut args = vec!["--console-listen", "127.0.0.1:0"];
        args.extend(
            flag.map(|(name, value)| [name, value])
                .into_iter()
                .flatten(),
        );
        let env: Vec<(&str, &str)> = variable.into_iter().collect();
        let (code, stderr) = refusal(&args, &env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {stderr}");
        assert!(
            stderr.contains("required arguments were not provided"),
            "{stderr}"
        );
        assert!(stderr.contains(missing), "{missing}: {stderr}");
    }
}

/// One sign-in over HTTPS in a real headless Chromium (tests/console/https.mjs):
/// the browser's own Origin and Sec-Fetch-Site over TLS pass the checks, and
/// HSTS comes with every answer. Skipped without Chromium, as the console's
/// browser test is (tests/it/console.rs).
#[tokio::test]
async fn a_browser_signs_in_and_out_over_https() {
    let Some(chromium) = crate::console::chromium() else {
        return;
    };
    let directory = std::env::temp_dir().join(format!("idemd-console-tls-{}", fresh_uuid()));
    std::fs::create_dir_all(&directory).expect("temp dir");
    let ca = Ca::new("console CA");
    let serving = ca.server_for(&[NAME]);
    let (cert, key) = write_pair(&directory, &serving);
    let data = Backend::sqlite().await.into_process_data().await;
    let token = data.create_tenant("support");
    let port = free_port();
    let server = data
        .serve_with(
            &[],
            &[
                ("IDEMD_CONSOLE_LISTEN", format!("127.0.0.1:{port}")),
                ("IDEMD_CONSOLE_TLS_CERT", cert),
                ("IDEMD_CONSOLE_TLS_KEY", key),
            ],
        )
        .await;
    let mut client = server.client().await;
    let unknown = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "browser-1", "{}"),
    )
    .await;
    fail_unknown(&mut client, &token, &unknown).await;

    let tests = crate::console::browser_test_directory();
    let env = vec![
        ("CONSOLE_URL", format!("https://{NAME}:{port}")),
        ("CONSOLE_SPKI", serving.spki_sha256_base64()),
        ("CONSOLE_RESOLVE", format!("MAP {NAME} 127.0.0.1")),
        ("CHROMIUM", chromium.display().to_string()),
        ("TOKEN_RECONCILER", token.clone()),
        ("OP_UNRESOLVED_ID", unknown.operation_id.clone()),
    ];
    tokio::task::spawn_blocking(move || {
        crate::console::browser_dependencies(&tests);
        crate::console::run(&tests, "node", &["https.mjs"], &env);
    })
    .await
    .expect("the browser run");
    // The browser checked the pages; the server says it signed it in.
    assert!(server.log().contains("console sign-in"), "{}", server.log());
    let _ = std::fs::remove_dir_all(&directory);
}

/// The console's files are read before anything listens: one that cannot
/// be read stops start-up, naming it.
#[test]
fn an_unreadable_console_certificate_stops_start_up() {
    let (code, stderr) = refusal(
        &[
            "--console-listen",
            "127.0.0.1:0",
            "--console-tls-cert",
            "/nonexistent/console.crt",
            "--console-tls-key",
            "/nonexistent/console.key",
        ],
        &[],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let line = stderr
        .lines()
        .find(|line| line.starts_with("idemd: "))
        .unwrap_or_else(|| panic!("no refusal line: {stderr}"));
    assert!(
        line.contains("cannot read /nonexistent/console.crt"),
        "{line}"
    );
}

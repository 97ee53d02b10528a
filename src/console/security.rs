//! What makes the console a web application that can be trusted with a
//! reconcile credential: headers on every answer (a strict CSP, no framing,
//! no sniffing, no referrer, no caching; HSTS over HTTPS), the session
//! cookie's attributes, the host a request may name, and the checks every
//! state-changing request passes (same origin, CSRF).
//!
//! The console is served one of two ways ([`Served`]). In plain HTTP it
//! listens on loopback only, so a request naming any other host was sent by
//! a page of another site whose name resolves to 127.0.0.1 (DNS rebinding)
//! and is refused. Over HTTPS it may listen on any address, and a request
//! must name a host its certificate is valid for: a browser reaching it under
//! another name has already refused the certificate, and a client that went
//! on anyway (a warning clicked through) is refused here before anything
//! runs. Either way the origin a form must come from is the scheme and the
//! host the request names.

use std::sync::Arc;

use axum::extract::Request;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::uri::Authority;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use tokio::net::TcpListener;

use super::listener::TlsListener;
use super::session::secrets_match;
use crate::app::LoadedTls;

/// The session cookie. `__Host-` makes the browser refuse it unless it is
/// Secure, host-only and for every path: no other site or subdomain can set
/// or shadow it.
pub const SESSION_COOKIE: &str = "__Host-idemd-console";

/// Scripts and styles only from the console's own embedded assets; no inline
/// code, no other origin, forms only to itself, never framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// Sent over HTTPS: browsers then refuse plain HTTP to this host for a year.
/// Not for subdomains (other services' business), not preloaded.
const STRICT_TRANSPORT_SECURITY: &str = "max-age=31536000";

/// Headers every answer carries.
pub async fn headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        CONTENT_SECURITY_POLICY,
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    // Not `no-referrer`: under it a browser sends `Origin: null` with the
    // console's own forms, and the same-origin check could not tell them
    // from a forged one. `same-origin` still tells other sites nothing.
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(
        headers,
        HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    );
    set(
        headers,
        HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        set(headers, header::CACHE_CONTROL, "no-store");
    }
    response
}

/// How the connection a request came on is served.
#[derive(Clone)]
pub(crate) enum Served {
    /// Plain HTTP on a loopback address.
    Loopback,
    /// HTTPS, under this configuration (taken at the handshake: a reload
    /// applies to the next connection).
    Tls(Arc<LoadedTls>),
}

impl Served {
    fn scheme(&self) -> &'static str {
        match self {
            Self::Loopback => "http",
            Self::Tls(_) => "https",
        }
    }

    /// Whether a request naming `host` (no port, no brackets) is answered.
    fn answers(&self, host: &str) -> bool {
        match self {
            Self::Loopback => loopback_name(host),
            Self::Tls(config) => config.certifies(host),
        }
    }
}

impl Connected<IncomingStream<'_, TcpListener>> for Served {
    fn connect_info(_: IncomingStream<'_, TcpListener>) -> Self {
        Self::Loopback
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for Served {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        // Every connection of the listener is TLS; were one not, the
        // loopback rule (the stricter one off loopback) would apply.
        stream
            .io()
            .tls()
            .map_or(Self::Loopback, |config| Self::Tls(config.clone()))
    }
}

/// The origin a state-changing request must come from: the scheme the
/// console is served with and the host (and port) the request names. Put
/// in each request's extensions by [`guard`].
#[derive(Clone, Debug)]
pub struct ExpectedOrigin(pub String);

/// The authority a request names: HTTP/2's `:authority` (hyper puts it in
/// the URI) or HTTP/1.1's Host. None when it has neither, when both are
/// given and differ, or when it is not an authority of `host[:port]`.
pub fn request_authority(uri: &axum::http::Uri, headers: &HeaderMap) -> Option<Authority> {
    let host = match headers.get(header::HOST) {
        Some(value) => Some(value.to_str().ok()?.parse::<Authority>().ok()?),
        None => None,
    };
    let authority = match (uri.authority(), host) {
        (Some(from_uri), Some(host)) if from_uri.as_str() != host.as_str() => return None,
        (Some(from_uri), _) => from_uri.clone(),
        (None, Some(host)) => host,
        (None, None) => return None,
    };
    // No user information: it is never part of an origin.
    (!authority.as_str().contains('@')).then_some(authority)
}

/// The host of an authority, without brackets: `[::1]:8080` → `::1`.
pub fn host_name(authority: &Authority) -> &str {
    let host = authority.host();
    host.strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host)
}

/// Whether `host` is a loopback name: `localhost` or a loopback address.
pub fn loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// Answers only requests that name a host the console may answer for (see
/// the module's note), tells the handlers the origin their forms must come
/// from, and adds Strict-Transport-Security over HTTPS, refusals included.
pub async fn guard(mut request: Request, next: Next) -> Response {
    let served = request
        .extensions()
        .get::<ConnectInfo<Served>>()
        .map_or(Served::Loopback, |ConnectInfo(served)| served.clone());
    let authority = request_authority(request.uri(), request.headers())
        .filter(|authority| served.answers(host_name(authority)));
    let mut response = match authority {
        Some(authority) => {
            let origin = format!("{}://{}", served.scheme(), authority.as_str());
            request.extensions_mut().insert(ExpectedOrigin(origin));
            next.run(request).await
        }
        None => {
            let refusal = match served {
                Served::Loopback => "the console answers only requests sent to a loopback address",
                Served::Tls(_) => {
                    "the console answers only requests sent to a name its certificate holds"
                }
            };
            (StatusCode::MISDIRECTED_REQUEST, refusal).into_response()
        }
    };
    if let Served::Tls(_) = served {
        response.headers_mut().insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(STRICT_TRANSPORT_SECURITY),
        );
    }
    response
}

/// The Set-Cookie value that starts a session: HttpOnly (no script reads
/// it), Secure, SameSite=Strict (no other site's page sends it), for the
/// session's absolute lifetime at most.
pub fn session_cookie(id: &str, max_age_seconds: u64) -> String {
    format!(
        "{SESSION_COOKIE}={id}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={max_age_seconds}"
    )
}

/// The Set-Cookie value that ends it.
pub fn cleared_cookie() -> String {
    format!("{SESSION_COOKIE}=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0")
}

/// The session id the request's cookie carries.
pub fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .filter_map(|cookie| cookie.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
}

/// Whether a state-changing request comes from the console's own pages:
/// the browser's Sec-Fetch-Site (when sent) says same-origin, and its Origin
/// (when sent) is `expected`, scheme included (a page served over plain
/// HTTP by another listener on the same name is another origin). A request
/// that carries neither (not a browser) still needs the CSRF token.
pub fn same_origin(headers: &HeaderMap, expected: &ExpectedOrigin) -> bool {
    let header = |name| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(site) = header(HeaderName::from_static("sec-fetch-site"))
        && site != "same-origin"
        && site != "none"
    {
        return false;
    }
    header(header::ORIGIN).is_none_or(|origin| origin.eq_ignore_ascii_case(&expected.0))
}

/// Whether a form's CSRF token is its session's.
pub fn csrf_ok(expected: &str, given: Option<&str>) -> bool {
    given.is_some_and(|given| secrets_match(expected, given))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_session_id_is_read_from_its_cookie_only() {
        let with = headers(&[("cookie", "a=1; __Host-idemd-console=abc; b=2")]);
        assert_eq!(session_id(&with), Some("abc"));
        let without = headers(&[("cookie", "idemd-console=abc")]);
        assert_eq!(session_id(&without), None);
        let empty = headers(&[("cookie", "__Host-idemd-console=")]);
        assert_eq!(session_id(&empty), None);
    }

    #[test]
    fn cross_site_requests_are_told_apart() {
        let loopback = ExpectedOrigin("http://127.0.0.1:8080".into());
        let tls = ExpectedOrigin("https://console.example.com".into());
        let cases = [
            (vec![], &loopback, true),
            (vec![("sec-fetch-site", "same-origin")], &loopback, true),
            (vec![("sec-fetch-site", "none")], &tls, true),
            (vec![("sec-fetch-site", "cross-site")], &loopback, false),
            (vec![("sec-fetch-site", "same-site")], &tls, false),
            (vec![("origin", "http://127.0.0.1:8080")], &loopback, true),
            (vec![("origin", "http://evil.example")], &loopback, false),
            (vec![("origin", "null")], &loopback, false),
            (vec![("origin", "https://console.example.com")], &tls, true),
            (vec![("origin", "https://Console.Example.com")], &tls, true),
            // Another scheme, port or host is another origin.
            (vec![("origin", "http://console.example.com")], &tls, false),
            (
                vec![("origin", "https://console.example.com:8443")],
                &tls,
                false,
            ),
            (vec![("origin", "https://other.example.com")], &tls, false),
            (
                vec![
                    ("origin", "https://console.example.com"),
                    ("sec-fetch-site", "same-site"),
                ],
                &tls,
                false,
            ),
        ];
        for (pairs, expected_origin, expected) in cases {
            assert_eq!(
                same_origin(&headers(&pairs), expected_origin),
                expected,
                "{pairs:?} against {expected_origin:?}"
            );
        }
    }

    fn named(host: &'static str) -> Option<String> {
        let uri = axum::http::Uri::from_static("/login");
        request_authority(&uri, &headers(&[("host", host)]))
            .map(|authority| host_name(&authority).to_owned())
    }

    #[test]
    fn only_loopback_hosts_are_answered_in_plain_http() {
        let cases = [
            ("127.0.0.1:8080", true),
            ("127.0.0.1", true),
            ("localhost:8080", true),
            ("LOCALHOST", true),
            ("[::1]:8080", true),
            ("127.8.9.10:80", true),
            ("attacker.example:8080", false),
            ("10.0.0.1:8080", false),
            ("[2001:db8::1]:8080", false),
            ("localhost.attacker.example", false),
        ];
        for (host, expected) in cases {
            let name = named(host).unwrap_or_else(|| panic!("{host} is an authority"));
            assert_eq!(Served::Loopback.answers(&name), expected, "{host}");
        }
    }

    #[test]
    fn the_authority_is_the_host_header_or_the_uri_never_two_different_ones() {
        let absent = axum::http::Uri::from_static("/login");
        assert!(request_authority(&absent, &HeaderMap::new()).is_none());
        assert!(named("user@127.0.0.1:8080").is_none());
        assert!(named("127.0.0.1:8080/path").is_none());
        // HTTP/2: the URI's authority, with or without a Host that agrees.
        let h2 = axum::http::Uri::from_static("https://console.example.com/login");
        let authority = request_authority(&h2, &HeaderMap::new()).expect("from the uri");
        assert_eq!(authority.as_str(), "console.example.com");
        let agreeing = headers(&[("host", "console.example.com")]);
        assert!(request_authority(&h2, &agreeing).is_some());
        let differing = headers(&[("host", "attacker.example")]);
        assert!(request_authority(&h2, &differing).is_none());
    }

    #[test]
    fn a_csrf_token_must_be_the_sessions() {
        assert!(csrf_ok("abc", Some("abc")));
        assert!(!csrf_ok("abc", Some("abd")));
        assert!(!csrf_ok("abc", None));
    }
}

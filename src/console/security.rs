//! What makes the console a web application that can be trusted with a
//! reconcile credential: headers on every answer (a strict CSP, no framing,
//! no sniffing, no referrer, no caching), the session cookie's attributes,
//! and the checks every state-changing request passes (same origin, CSRF).

use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;

use super::session::secrets_match;

/// The session cookie. `__Host-` makes the browser refuse it unless it is
/// Secure, host-only and for every path: no other site or subdomain can set
/// or shadow it.
pub const SESSION_COOKIE: &str = "__Host-idemd-console";

/// Scripts and styles only from the console's own embedded assets; no inline
/// code, no other origin, forms only to itself, never framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

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

/// Whether the request was sent to a loopback name: the console listens on
/// loopback only, so any other Host means a page of another site reached it
/// by DNS rebinding (its name resolving to 127.0.0.1), and is refused
/// before anything runs.
pub fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
    else {
        // HTTP/1.0 without Host, or HTTP/2 with :authority only (axum puts
        // it in the URI); the browser always sends one.
        return false;
    };
    let name = match host.strip_prefix('[') {
        // [::1]:8080
        Some(bracketed) => bracketed
            .split_once(']')
            .map_or(bracketed, |(name, _)| name),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// Refuses a request whose Host is not a loopback name (see
/// [`loopback_host`]).
pub async fn refuse_foreign_hosts(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if loopback_host(request.headers()) {
        next.run(request).await
    } else {
        use axum::response::IntoResponse;
        (
            axum::http::StatusCode::MISDIRECTED_REQUEST,
            "the console answers only requests sent to a loopback address",
        )
            .into_response()
    }
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
/// (when sent) names the host the request was sent to. A request that
/// carries neither (not a browser) still needs the CSRF token.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let header = |name| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(site) = header(HeaderName::from_static("sec-fetch-site"))
        && site != "same-origin"
        && site != "none"
    {
        return false;
    }
    match (header(header::ORIGIN), header(header::HOST)) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, origin_host)| origin_host == host),
        (Some(_), None) => false,
        (None, _) => true,
    }
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
        let cases = [
            (vec![], true),
            (vec![("sec-fetch-site", "same-origin")], true),
            (vec![("sec-fetch-site", "cross-site")], false),
            (vec![("sec-fetch-site", "same-site")], false),
            (
                vec![
                    ("origin", "http://127.0.0.1:8080"),
                    ("host", "127.0.0.1:8080"),
                ],
                true,
            ),
            (
                vec![
                    ("origin", "http://evil.example"),
                    ("host", "127.0.0.1:8080"),
                ],
                false,
            ),
            (vec![("origin", "null"), ("host", "127.0.0.1:8080")], false),
        ];
        for (pairs, expected) in cases {
            assert_eq!(same_origin(&headers(&pairs)), expected, "{pairs:?}");
        }
    }

    #[test]
    fn only_loopback_hosts_are_answered() {
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
            let map = headers(&[("host", host)]);
            assert_eq!(loopback_host(&map), expected, "{host}");
        }
        assert!(!loopback_host(&HeaderMap::new()));
    }

    #[test]
    fn a_csrf_token_must_be_the_sessions() {
        assert!(csrf_ok("abc", Some("abc")));
        assert!(!csrf_ok("abc", Some("abd")));
        assert!(!csrf_ok("abc", None));
    }
}

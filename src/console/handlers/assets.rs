//! The console's embedded stylesheet and script, and the answer to any
//! other path.

use axum::http::StatusCode;
use axum::http::header::{self};
use axum::response::{IntoResponse, Response};

pub(in crate::console) async fn stylesheet() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../assets/console.css"),
    )
}

pub(in crate::console) async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../assets/console.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}

pub(in crate::console) async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}

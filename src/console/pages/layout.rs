//! The frame every page shares: navigation, the search box, who is signed
//! in and the sign-out form, and the sign-in and error pages.

use maud::{DOCTYPE, Markup, html};

use crate::console::calls::Refusal;

/// Who is looking, as every page shows it.
pub struct Viewer {
    pub credential: String,
    pub tenant: String,
    pub scopes: String,
    pub admin: bool,
    /// The session's CSRF token, put in every form.
    pub csrf: String,
}

/// The CSRF token field every form carries.
pub fn csrf_field(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name="csrf" value=(viewer.csrf); }
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · idemd console" }
            link rel="stylesheet" href="/assets/console.css";
            script src="/assets/console.js" defer {}
        }
    }
}

pub fn page(title: &str, viewer: &Viewer, search: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header.top {
                    a.brand href="/" { "idemd" }
                    nav {
                        a href="/" { "Dashboard" }
                        a href="/unresolved" { "Unresolved" }
                        a href="/operations" { "Operations" }
                        a href="/conflicts" { "Conflicts" }
                        a href="/holds" { "Holds" }
                    }
                    form.search method="get" action="/search" role="search" {
                        input type="search" name="q" value=(search) aria-label="Search"
                            placeholder="operation_id, operation/key, a key, or a filter: state:unknown op:payments.* age>10m";
                        button type="submit" { "Search" }
                    }
                    div.who {
                        span title=(format!("scopes: {}", viewer.scopes)) {
                            (viewer.credential) " · tenant " (viewer.tenant)
                            @if viewer.admin { " · admin" }
                        }
                        form method="post" action="/logout" {
                            (csrf_field(viewer))
                            button.link type="submit" { "Sign out" }
                        }
                    }
                }
                main { h1 { (title) } (body) }
            }
        }
    }
}

pub fn login_page(problem: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Sign in"))
            body.login {
                main {
                    h1 { "idemd console" }
                    p { "Sign in with a token that holds the " code { "reconcile" } " or "
                        code { "admin" } " scope. The token stays on the server; your browser keeps only a session cookie." }
                    @if let Some(problem) = problem {
                        p.problem role="alert" { (problem) }
                    }
                    form method="post" action="/login" {
                        label for="token" { "Token" }
                        input #token type="password" name="token" autocomplete="off" required autofocus;
                        button type="submit" { "Sign in" }
                    }
                }
            }
        }
    }
}

/// A refused call, with what it means.
pub fn refusal(refusal: &Refusal) -> Markup {
    html! {
        div.problem role="alert" {
            strong { (format!("{:?}", refusal.code)) }
            @if let Some(reason) = &refusal.reason { " · " code { (reason) } }
            p { (refusal.message) }
        }
    }
}

pub fn error_page(viewer: &Viewer, search: &str, title: &str, refused: &Refusal) -> Markup {
    page(title, viewer, search, refusal(refused))
}

//! Request selectors: the fields that define a request, so that a retry
//! which changes anything else (a trace id, a timestamp) replays instead of
//! conflicting. The syntax and the rules are docs/api.md, "Request
//! selectors", the same in every idemd client; the shared vectors are
//! testdata/selectors.json.

use std::fmt;

use idemd_ijson as ijson;
use serde_json::{Map, Value};

use crate::error::{Error, FieldViolation};
use crate::execute::Payload;

/// A selector that cannot be right, refused by [`SelectorBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SelectorError {
    /// The pointer `""` (the whole document) in include or exclude.
    WholeDocument { list: &'static str },
    /// A pointer that does not start with `/`.
    NoLeadingSlash { pointer: String },
    /// A `~` followed by anything but `0` or `1`.
    BadEscape { pointer: String },
    /// The same pointer twice in one list.
    DuplicatePointer { list: &'static str, pointer: String },
    /// A header name that is not an HTTP token (RFC 9110).
    NotAToken { name: String },
    /// The same header twice, in any case.
    DuplicateHeader { name: String },
}

impl fmt::Display for SelectorError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WholeDocument { list } => write!(
                formatter,
                "{list}: the pointer \"\" (the whole document) cannot be included or excluded"
            ),
            Self::NoLeadingSlash { pointer } => {
                write!(formatter, "pointer {pointer:?} does not start with /")
            }
            Self::BadEscape { pointer } => {
                write!(
                    formatter,
                    "pointer {pointer:?}: ~ must be followed by 0 or 1"
                )
            }
            Self::DuplicatePointer { list, pointer } => {
                write!(formatter, "{list} names the pointer {pointer:?} twice")
            }
            Self::NotAToken { name } => write!(formatter, "header name {name:?} is not a token"),
            Self::DuplicateHeader { name } => write!(formatter, "headers names {name:?} twice"),
        }
    }
}

impl std::error::Error for SelectorError {}

/// The fields that define a request: `include` and `exclude` JSON Pointers
/// (RFC 6901) and `headers` (for HTTP middlewares). Made by
/// [`Selector::builder`]; an empty one is the whole body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    include: Vec<String>,
    exclude: Vec<String>,
    headers: Vec<String>,
    include_paths: Vec<Vec<String>>,
    exclude_paths: Vec<Vec<String>>,
    header_names: Vec<String>,
}

/// Builds a [`Selector`]; each list optional.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct SelectorBuilder {
    include: Vec<String>,
    exclude: Vec<String>,
    headers: Vec<String>,
}

impl SelectorBuilder {
    /// JSON Pointers to the members that define the request (`/amount`,
    /// `/recipient/iban`, `/a~1b` for the member `a/b`).
    pub fn include<I: IntoIterator<Item = S>, S: Into<String>>(mut self, pointers: I) -> Self {
        self.include.extend(pointers.into_iter().map(Into::into));
        self
    }

    /// JSON Pointers to members that do not define the request.
    pub fn exclude<I: IntoIterator<Item = S>, S: Into<String>>(mut self, pointers: I) -> Self {
        self.exclude.extend(pointers.into_iter().map(Into::into));
        self
    }

    /// Request header names, in any case (for HTTP middlewares).
    pub fn headers<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.headers.extend(names.into_iter().map(Into::into));
        self
    }

    /// The selector, or why it cannot be right.
    pub fn build(self) -> Result<Selector, SelectorError> {
        let include_paths = paths("include", &self.include)?;
        let exclude_paths = paths("exclude", &self.exclude)?;
        let mut header_names: Vec<String> = Vec::with_capacity(self.headers.len());
        for name in &self.headers {
            if !is_token(name) {
                return Err(SelectorError::NotAToken { name: name.clone() });
            }
            let lower = name.to_ascii_lowercase();
            if header_names.contains(&lower) {
                return Err(SelectorError::DuplicateHeader { name: name.clone() });
            }
            header_names.push(lower);
        }
        Ok(Selector {
            include: self.include,
            exclude: self.exclude,
            headers: self.headers,
            include_paths,
            exclude_paths,
            header_names,
        })
    }
}

impl Selector {
    pub fn builder() -> SelectorBuilder {
        SelectorBuilder::default()
    }

    pub fn include(&self) -> &[String] {
        &self.include
    }

    pub fn exclude(&self) -> &[String] {
        &self.exclude
    }

    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    /// Nothing is selected: the request is the whole body, as without a
    /// selector.
    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty() && self.headers.is_empty()
    }

    /// The RFC 8785 form of the document selected from a JSON `body` and the
    /// request's `headers` (name, value pairs in arrival order, names in any
    /// case): what is fingerprinted. A body the selector cannot apply to (not
    /// I-JSON; not a JSON object while include or exclude is given) is
    /// [`Error::InvalidArgument`], as the server would answer.
    pub fn canonical(&self, body: &str, headers: &[(&str, &str)]) -> Result<Vec<u8>, Error> {
        let document = self.document(body, headers)?;
        ijson::canonical(&document).map_err(|ijson::NotIJson(why)| refused(&why))
    }

    /// The json-mode fingerprint of [`Selector::canonical`].
    pub fn fingerprint(&self, body: &str, headers: &[(&str, &str)]) -> Result<[u8; 32], Error> {
        Ok(ijson::json_fingerprint(&self.canonical(body, headers)?))
    }

    fn document(&self, body: &str, headers: &[(&str, &str)]) -> Result<Value, Error> {
        let mut document = ijson::parse(body)
            .map_err(|ijson::NotIJson(why)| refused(&format!("the body is not I-JSON: {why}")))?;
        let narrows = !self.include_paths.is_empty() || !self.exclude_paths.is_empty();
        if narrows && !document.is_object() {
            return Err(refused(
                "include and exclude need a body that is a JSON object",
            ));
        }
        if !self.include_paths.is_empty() {
            let mut selected = Map::new();
            for path in &self.include_paths {
                if let Some(value) = value_at(&document, path) {
                    set_at(&mut selected, path, value.clone());
                }
            }
            document = Value::Object(selected);
        }
        for path in &self.exclude_paths {
            remove_at(&mut document, path);
        }
        if self.header_names.is_empty() {
            return Ok(document);
        }
        let mut picked = Map::new();
        for wanted in &self.header_names {
            let values: Vec<&str> = headers
                .iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case(wanted))
                .map(|(_, value)| *value)
                .collect();
            if !values.is_empty() {
                picked.insert(wanted.clone(), Value::String(values.join(", ")));
            }
        }
        let mut with_headers = Map::new();
        with_headers.insert("body".to_owned(), document);
        with_headers.insert("headers".to_owned(), Value::Object(picked));
        Ok(Value::Object(with_headers))
    }
}

impl Payload {
    /// The payload of a JSON document narrowed to what `selector` picks from
    /// it: the selected document's fingerprint ([`Payload::Fingerprint`]), so
    /// that a change outside the selection replays and one inside it is
    /// [`Error::Conflict`]. An empty selector is the whole document
    /// ([`Payload::Json`]). A document it cannot apply to (not I-JSON; not an
    /// object while include or exclude is given) is [`Error::InvalidArgument`],
    /// before any RPC.
    pub fn selected_json(document: &str, selector: &Selector) -> Result<Payload, Error> {
        if selector.is_empty() {
            return Ok(Payload::Json(document.to_owned()));
        }
        Ok(Payload::Fingerprint(
            selector.fingerprint(document, &[])?.to_vec(),
        ))
    }
}

fn refused(why: &str) -> Error {
    Error::InvalidArgument {
        field_violations: vec![FieldViolation {
            field: "json_payload".to_owned(),
            description: why.to_owned(),
        }],
        message: why.to_owned(),
    }
}

fn paths(list: &'static str, pointers: &[String]) -> Result<Vec<Vec<String>>, SelectorError> {
    let mut out = Vec::with_capacity(pointers.len());
    for (index, pointer) in pointers.iter().enumerate() {
        if pointers
            .get(..index)
            .is_some_and(|before| before.contains(pointer))
        {
            return Err(SelectorError::DuplicatePointer {
                list,
                pointer: pointer.clone(),
            });
        }
        out.push(tokens(list, pointer)?);
    }
    Ok(out)
}

/// The reference tokens of an RFC 6901 pointer, unescaped.
fn tokens(list: &'static str, pointer: &str) -> Result<Vec<String>, SelectorError> {
    if pointer.is_empty() {
        return Err(SelectorError::WholeDocument { list });
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(SelectorError::NoLeadingSlash {
            pointer: pointer.to_owned(),
        });
    };
    let bytes = pointer.as_bytes();
    let bad_escape = bytes
        .iter()
        .enumerate()
        .any(|(index, byte)| *byte == b'~' && !matches!(bytes.get(index + 1), Some(b'0' | b'1')));
    if bad_escape {
        return Err(SelectorError::BadEscape {
            pointer: pointer.to_owned(),
        });
    }
    Ok(rest
        .split('/')
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// An HTTP token (RFC 9110): what a header name may be.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

/// The value at `path`, walking objects only.
fn value_at<'a>(document: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(document, |value, token| value.as_object()?.get(token))
}

/// Sets `value` at `path` in `object`, making intermediate objects as needed.
fn set_at(object: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut target = object;
    for token in parents {
        let entry = target
            .entry(token.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(next) = entry else {
            return;
        };
        target = next;
    }
    target.insert(last.clone(), value);
}

/// Removes the member at `path` when the path resolves.
fn remove_at(document: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut target = document;
    for token in parents {
        let Some(next) = target
            .as_object_mut()
            .and_then(|object| object.get_mut(token))
        else {
            return;
        };
        target = next;
    }
    if let Some(object) = target.as_object_mut() {
        object.remove(last);
    }
}

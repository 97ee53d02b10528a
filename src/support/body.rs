//! Result bodies as a person can read them: as text when they are text,
//! else their size and a hex prefix.

use crate::proto::Result as ProtoResult;

/// Bytes of an opaque body shown in hex.
const HEX_PREFIX_BYTES: usize = 32;

/// The body as text when its content type says text (`text/*`, JSON or
/// `+json`) and it is valid UTF-8; None otherwise.
pub fn readable_body(result: &ProtoResult) -> Option<&str> {
    let content_type = result
        .content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let textual = content_type.starts_with("text/")
        || content_type == "application/json"
        || content_type.ends_with("+json");
    textual
        .then(|| std::str::from_utf8(&result.body).ok())
        .flatten()
}

/// The size and the first 32 bytes in hex, for a body that is not text.
pub fn opaque_body(body: &[u8]) -> String {
    let prefix: String = body
        .iter()
        .take(HEX_PREFIX_BYTES)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let more = if body.len() > HEX_PREFIX_BYTES {
        "…"
    } else {
        ""
    };
    format!("{} bytes: {prefix}{more}", body.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(content_type: &str, body: &[u8]) -> ProtoResult {
        ProtoResult {
            content_type: content_type.to_owned(),
            body: body.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn text_is_shown_as_text_only_when_its_type_says_so_and_it_decodes() {
        let cases: [(&str, &[u8], Option<&str>); 6] = [
            ("application/json", b"{\"a\":1}", Some("{\"a\":1}")),
            ("text/plain; charset=utf-8", b"ok", Some("ok")),
            ("application/problem+json", b"{}", Some("{}")),
            ("Application/JSON", b"[]", Some("[]")),
            ("application/octet-stream", b"ok", None),
            ("text/plain", &[0xff, 0xfe], None),
        ];
        for (content_type, body, expected) in cases {
            assert_eq!(
                readable_body(&result(content_type, body)),
                expected,
                "{content_type}"
            );
        }
    }

    #[test]
    fn an_opaque_body_shows_its_size_and_a_hex_prefix() {
        assert_eq!(opaque_body(&[0xde, 0xad]), "2 bytes: dead");
        let long = opaque_body(&[0u8; 40]);
        assert!(long.starts_with("40 bytes: 0000"), "{long}");
        assert!(long.ends_with('…'), "{long}");
    }
}

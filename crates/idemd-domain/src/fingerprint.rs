//! Request fingerprints, computed the same way in every language:
//!
//! ```text
//! SHA-256("idem.v1" 0x00 mode 0x00 canonical-bytes)
//! ```
//!
//! with mode `json` (the RFC 8785 JCS form of an I-JSON document) or `bytes`
//! (the payload as given). The domain prefix keeps the two modes, and any
//! future version, from ever producing the same fingerprint for different
//! input. I-JSON (RFC 7493) is enforced because JCS would otherwise merge
//! distinct requests: `{"a":1,"a":2}` has no single meaning, a lone surrogate
//! has no UTF-8 form, and `9007199254740993` rounds to `9007199254740992`.
//! For the same reason a number written with a fraction or an exponent is
//! refused unless it denotes exactly the value its canonical form writes
//! (`100.10000000000000001` is the double of `100.1`, `1.0000000000000001`
//! the double of `1`): it would replay the request for that other number
//! instead of conflicting with it.

use super::model::Fingerprint;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FingerprintError {
    #[error("a fingerprint is exactly 32 bytes, got {0}")]
    WrongLength(usize),
    #[error("not I-JSON: {0}")]
    NotIJson(String),
}

pub fn from_client_bytes(bytes: &[u8]) -> Result<Fingerprint, FingerprintError> {
    let array: [u8; 32] = bytes
        .try_into()
        .map_err(|_| FingerprintError::WrongLength(bytes.len()))?;
    Ok(Fingerprint(array))
}

pub fn of_bytes(payload: &[u8]) -> Fingerprint {
    Fingerprint(idemd_ijson::fingerprint("bytes", payload))
}

pub fn of_json(document: &str) -> Result<Fingerprint, FingerprintError> {
    Ok(Fingerprint(idemd_ijson::json_fingerprint(&canonical_json(
        document,
    )?)))
}

/// The RFC 8785 canonical form of an I-JSON document (the rules live in the
/// `idemd-ijson` crate, which the Rust client shares).
pub fn canonical_json(document: &str) -> Result<Vec<u8>, FingerprintError> {
    idemd_ijson::canonical_json(document)
        .map_err(|idemd_ijson::NotIJson(why)| FingerprintError::NotIJson(why))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::model::hex;

    // Test vectors: other languages' clients must reproduce these bytes.
    // They are also listed in README.md and testdata/fingerprints.json.
    #[test]
    fn json_fingerprint_matches_the_published_vector() {
        let canonical = canonical_json(r#"{ "b": [1, 2.50, "x"], "a": {"z": null, "y": true} }"#)
            .expect("valid I-JSON");
        assert_eq!(
            String::from_utf8(canonical).expect("utf-8"),
            r#"{"a":{"y":true,"z":null},"b":[1,2.5,"x"]}"#
        );
        let fingerprint = of_json(r#"{"amount":1000,"currency":"EUR"}"#).expect("valid");
        assert_eq!(
            hex(&fingerprint.0),
            hex(&idemd_ijson::fingerprint(
                "json",
                br#"{"amount":1000,"currency":"EUR"}"#
            ))
        );
        assert_eq!(
            hex(&fingerprint.0),
            "b1b2b87aead43d01e114b4767c954105984d07bacaad3c276b7fd8c0bf6ea63a"
        );
    }

    #[test]
    fn bytes_fingerprint_matches_the_published_vector() {
        assert_eq!(
            hex(&of_bytes(b"hello").0),
            "94d0eb7fa404bbd41180fb4f0890630b7d516de1603730ecb60dc2e5e9dd1e55"
        );
    }

    #[test]
    fn equivalent_json_documents_share_a_fingerprint() {
        let compact = of_json(r#"{"a":1,"b":"\u00e9"}"#).expect("valid");
        let spaced = of_json("{ \"b\" : \"é\",\n \"a\" : 1.0 }").expect("valid");
        assert_eq!(compact, spaced);
    }

    #[test]
    fn modes_are_domain_separated() {
        assert_ne!(
            of_bytes(br#"{"a":1}"#),
            of_json(r#"{"a":1}"#).expect("valid")
        );
    }

    #[test]
    fn non_i_json_is_refused() {
        for (document, why) in [
            (r#"{"a":1,"a":2}"#, "duplicate key"),
            (r#"{"x":{"a":1,"a":1}}"#, "nested duplicate key"),
            (r#"["\ud800"]"#, "lone leading surrogate"),
            (r#"["\udc00"]"#, "lone trailing surrogate"),
            ("9007199254740993", "integer above 2^53"),
            ("-9007199254740993", "integer below -2^53"),
            ("18446744073709551616", "integer above u64"),
            ("1e300", "integral float beyond 2^53"),
            ("{} {}", "trailing content"),
            ("", "empty document"),
            ("{\"a\":", "truncated"),
        ] {
            assert!(
                matches!(of_json(document), Err(FingerprintError::NotIJson(_))),
                "{why}: {document:?} must be refused"
            );
        }
        for document in [
            "9007199254740992",
            "-9007199254740992",
            "0.1",
            "1.5e3",
            r#""\ud83d\ude00""#,
        ] {
            assert!(of_json(document).is_ok(), "{document} is I-JSON");
        }
    }

    #[test]
    fn float_literals_that_a_double_rounds_to_another_integer_are_refused() {
        for (document, why) in [
            (
                r#"{"amount":9007199254740993.0}"#,
                "2^53 + 1, parsed as 2^53",
            ),
            (
                "9007199254740992.0",
                "a double of 2^53 may stand for 2^53 + 1",
            ),
            ("-9007199254740993.0", "-(2^53 + 1)"),
            ("9.007199254740993e15", "2^53 + 1 with an exponent"),
            ("4503599627370496.5", "rounds to 2^52"),
            ("1.0000000000000001", "rounds to 1"),
            (r#"{"amount":100.000000000000001}"#, "rounds to 100"),
            ("1e-400", "underflows to 0"),
            (r#"[1, {"x":"1.5", "y":[2.0000000000000001]}]"#, "nested"),
        ] {
            assert!(
                matches!(of_json(document), Err(FingerprintError::NotIJson(_))),
                "{why}: {document:?} must be refused"
            );
        }
        for document in [
            "9007199254740991.0",
            "-9007199254740991.0",
            "4503599627370496.0",
            "1e2",
            "12.50e1",
            "0.000",
            "-0.0",
            "1.5",
            "0.1",
            r#"{"note":"1.0000000000000001 in a string is text"}"#,
        ] {
            assert!(of_json(document).is_ok(), "{document} is I-JSON");
        }
    }

    #[test]
    fn numbers_a_double_cannot_tell_apart_are_refused() {
        // 100.1 and 100.10000000000000001 are one double: accepting both
        // would replay one amount for the other.
        assert!(of_json(r#"{"amount":100.1}"#).is_ok());
        for (document, why) in [
            (r#"{"amount":100.10000000000000001}"#, "the double of 100.1"),
            ("0.30000000000000000001", "the double of 0.3"),
            (
                "0.3000000000000000444089209850062616169452667236328125",
                "the exact value of the double of 0.30000000000000004, written out",
            ),
            ("1.00000000000000000001e-5", "the double of 1e-5"),
            ("-2.0000000000000000001e300", "beyond 2^53 anyway"),
            (r#"[0.1, {"x": [123.4560000000000000001]}]"#, "nested"),
        ] {
            assert!(
                matches!(of_json(document), Err(FingerprintError::NotIJson(_))),
                "{why}: {document:?} must be refused"
            );
        }
        for document in [
            "0.30000000000000004",
            "100.10",
            "1.000e-5",
            "123.456",
            "5e-324",
            "0.1e1",
            "-0.000e5",
        ] {
            assert!(
                of_json(document).is_ok(),
                "{document}: exactly its canonical value"
            );
        }
    }

    #[test]
    fn exact_float_literals_fingerprint_as_the_integers_they_denote() {
        for (float, integer) in [
            (
                r#"{"amount":9007199254740991.0}"#,
                r#"{"amount":9007199254740991}"#,
            ),
            (r#"{"amount":1e2}"#, r#"{"amount":100}"#),
            (r#"{"amount":12.50e1}"#, r#"{"amount":125}"#),
        ] {
            assert_eq!(of_json(float), of_json(integer), "{float} is {integer}");
        }
        assert_eq!(
            canonical_json(r#"{"amount":1e2,"rate":1.5e-3}"#).expect("valid"),
            br#"{"amount":100,"rate":0.0015}"#
        );
    }

    /// testdata/fingerprints.json, the vectors every client shares (checked
    /// independently by testdata/fingerprints.py): each one, as this
    /// implementation computes it.
    #[test]
    fn every_shared_test_vector_is_reproduced() {
        let file: Value = serde_json::from_str(include_str!("../../../testdata/fingerprints.json"))
            .expect("testdata/fingerprints.json is JSON");
        let vectors = file["vectors"].as_array().expect("a vectors array");
        assert!(vectors.len() >= 50, "only {} vectors", vectors.len());
        let text = |vector: &Value, field: &str| vector[field].as_str().map(str::to_owned);
        for vector in vectors {
            let name = text(vector, "name").expect("every vector has a name");
            let expected = text(vector, "fingerprint");
            match text(vector, "mode").as_deref() {
                Some("bytes") => {
                    let input = text(vector, "input_hex").expect("input_hex");
                    let payload: Vec<u8> = (0..input.len())
                        .step_by(2)
                        .map(|at| u8::from_str_radix(&input[at..at + 2], 16).expect("hex"))
                        .collect();
                    assert_eq!(Some(hex(&of_bytes(&payload).0)), expected, "{name}");
                }
                Some("json") => {
                    let input = text(vector, "input").expect("input");
                    match text(vector, "refused") {
                        Some(why) => assert!(
                            matches!(of_json(&input), Err(FingerprintError::NotIJson(_))),
                            "{name}: {input:?} must be refused: {why}"
                        ),
                        None => {
                            let canonical = canonical_json(&input)
                                .unwrap_or_else(|error| panic!("{name}: {error}"));
                            assert_eq!(
                                String::from_utf8(canonical).ok(),
                                text(vector, "canonical"),
                                "{name}"
                            );
                            let fingerprint = of_json(&input).expect("valid");
                            assert_eq!(Some(hex(&fingerprint.0)), expected, "{name}");
                        }
                    }
                }
                mode => panic!("{name}: unknown mode {mode:?}"),
            }
        }
    }

    #[test]
    fn client_fingerprints_must_be_32_bytes() {
        assert_eq!(
            from_client_bytes(&[7; 31]),
            Err(FingerprintError::WrongLength(31))
        );
        assert_eq!(from_client_bytes(&[7; 32]), Ok(Fingerprint([7; 32])));
    }
}

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

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

use super::model::Fingerprint;

const DOMAIN: &[u8] = b"idem.v1";
/// 2^53: beyond it, IEEE doubles cannot tell neighbouring integers apart.
/// An integer literal is read exactly, so 2^53 itself is still told from
/// 2^53 + 1; a double of 2^53 may be either, so float literals stop below it.
const MAX_SAFE_MAGNITUDE: u64 = 1 << 53;

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
    domain_separated("bytes", payload)
}

pub fn of_json(document: &str) -> Result<Fingerprint, FingerprintError> {
    Ok(domain_separated("json", &canonical_json(document)?))
}

/// The RFC 8785 canonical form of an I-JSON document.
pub fn canonical_json(document: &str) -> Result<Vec<u8>, FingerprintError> {
    let mut deserializer = serde_json::Deserializer::from_str(document);
    let IJson(value) = serde::Deserialize::deserialize(&mut deserializer)
        .map_err(|error| FingerprintError::NotIJson(error.to_string()))?;
    deserializer
        .end()
        .map_err(|error| FingerprintError::NotIJson(error.to_string()))?;
    refuse_numbers_a_double_cannot_tell_apart(document)?;
    serde_json_canonicalizer::to_vec(&value)
        .map_err(|error| FingerprintError::NotIJson(error.to_string()))
}

fn domain_separated(mode: &str, canonical: &[u8]) -> Fingerprint {
    let mut hasher = Sha256::new();
    hasher.update(DOMAIN);
    hasher.update([0]);
    hasher.update(mode.as_bytes());
    hasher.update([0]);
    hasher.update(canonical);
    Fingerprint(hasher.finalize().into())
}

/// A JSON value that deserializes only from I-JSON. serde_json itself already
/// refuses lone surrogates and invalid UTF-8; this adds duplicate keys and
/// integers that a double cannot hold exactly.
struct IJson(Value);

impl<'de> serde::Deserialize<'de> for IJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IJsonVisitor).map(IJson)
    }
}

struct IJsonVisitor;

impl<'de> Visitor<'de> for IJsonVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an I-JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        if value.unsigned_abs() > MAX_SAFE_MAGNITUDE {
            return Err(E::custom(format!(
                "integer {value} is beyond +-2^53 and cannot be compared exactly"
            )));
        }
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        if value > MAX_SAFE_MAGNITUDE {
            return Err(E::custom(format!(
                "integer {value} is beyond +-2^53 and cannot be compared exactly"
            )));
        }
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        // `1e300`, `18446744073709551616` or `9007199254740993.0` arrive
        // here: from 2^53 on every double is an integer that may stand for
        // its neighbour too (2^53 + 1 parses as 2^53), so all are refused.
        if value.abs() >= MAX_SAFE_MAGNITUDE as f64 {
            return Err(E::custom(
                "a number of magnitude 2^53 or more cannot be compared exactly",
            ));
        }
        Number::from_f64(value)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut sequence: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(IJson(item)) = sequence.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            let IJson(value) = map.next_value()?;
            if object.contains_key(&name) {
                return Err(de::Error::custom(format!("duplicate object key {name:?}")));
            }
            object.insert(name, value);
        }
        Ok(Value::Object(object))
    }
}

/// Refuses every number written with a fraction or an exponent whose exact
/// decimal value is not the one its canonical form writes: a double holds
/// about 17 significant digits, so `100.10000000000000001` and `100.1` are
/// the same double, canonicalized as `100.1`, and would replay each other
/// instead of conflicting. Accepting only literals that denote exactly their
/// canonical value keeps the map from accepted literals to fingerprints
/// one-to-one. Runs on a document serde_json accepted, so every token outside
/// a string is a JSON value; the visitor cannot do this, as it sees the
/// double and not the digits.
fn refuse_numbers_a_double_cannot_tell_apart(document: &str) -> Result<(), FingerprintError> {
    let bytes = document.as_bytes();
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        match byte {
            b'"' => index = end_of_string(bytes, index + 1),
            b'-' | b'0'..=b'9' => {
                let start = index;
                while bytes.get(index).is_some_and(|byte| {
                    matches!(byte, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                }) {
                    index += 1;
                }
                let number = document.get(start..index).unwrap_or_default();
                refuse_inexact_number(number)?;
            }
            _ => index += 1,
        }
    }
    Ok(())
}

/// The index just after the string whose contents start at `index`.
fn end_of_string(bytes: &[u8], mut index: usize) -> usize {
    while let Some(&byte) = bytes.get(index) {
        match byte {
            b'\\' => index += 2,
            b'"' => return index + 1,
            _ => index += 1,
        }
    }
    index
}

fn refuse_inexact_number(number: &str) -> Result<(), FingerprintError> {
    // Integer literals are read exactly and bounded by the visitor.
    if !number.contains(['.', 'e', 'E']) {
        return Ok(());
    }
    let Ok(value) = number.parse::<f64>() else {
        return Ok(());
    };
    // Out of range or not finite: the visitor refuses these already.
    let Some(canonical) = Number::from_f64(value)
        .filter(|_| value.abs() < MAX_SAFE_MAGNITUDE as f64)
        .and_then(|number| serde_json_canonicalizer::to_string(&Value::Number(number)).ok())
    else {
        return Ok(());
    };
    if ExactDecimal::of(number) == ExactDecimal::of(&canonical) {
        return Ok(());
    }
    Err(FingerprintError::NotIJson(format!(
        "the number {number} has more significant digits than a double holds: it would be \
         compared as {canonical} (send {canonical}, or the value as a string)"
    )))
}

/// A JSON number's exact decimal value, by its digits alone: `digits` ×
/// 10^`exponent`, with no leading or trailing zeros in `digits` (zero has
/// none, and no sign). Saturating, since an exponent may have any number of
/// digits.
#[derive(Debug, PartialEq, Eq)]
struct ExactDecimal {
    negative: bool,
    digits: String,
    exponent: i64,
}

impl ExactDecimal {
    fn of(number: &str) -> Self {
        let (negative, unsigned) = match number.strip_prefix('-') {
            Some(unsigned) => (true, unsigned),
            None => (false, number),
        };
        let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
        let (integer_digits, fraction_digits) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all_digits = format!("{integer_digits}{fraction_digits}");
        let significant = all_digits.trim_start_matches('0');
        let digits = significant.trim_end_matches('0');
        if digits.is_empty() {
            return Self {
                negative: false,
                digits: String::new(),
                exponent: 0,
            };
        }
        let as_i64 = |count: usize| i64::try_from(count).unwrap_or(i64::MAX);
        let exponent = decimal_exponent(exponent)
            .saturating_sub(as_i64(fraction_digits.len()))
            .saturating_add(as_i64(significant.len() - digits.len()));
        Self {
            negative,
            digits: digits.to_owned(),
            exponent,
        }
    }
}

fn decimal_exponent(exponent: &str) -> i64 {
    let (negative, digits) = match exponent.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, exponent.strip_prefix('+').unwrap_or(exponent)),
    };
    let magnitude = digits.bytes().fold(0i64, |value, digit| {
        value
            .saturating_mul(10)
            .saturating_add(i64::from(digit.wrapping_sub(b'0')))
    });
    if negative { -magnitude } else { magnitude }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::model::hex;

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
            hex(&domain_separated("json", br#"{"amount":1000,"currency":"EUR"}"#).0)
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
    fn exact_decimals_ignore_zeros_and_notation_but_not_digits() {
        let same = |a: &str, b: &str| ExactDecimal::of(a) == ExactDecimal::of(b);
        assert!(same("100.10", "1001e-1"));
        assert!(same("0.000", "-0"));
        assert!(same("12.50e1", "125"));
        assert!(same("1e+21", "1000000000000000000000"));
        assert!(!same("100.1", "100.10000000000000001"));
        assert!(!same("-1.5", "1.5"));
        assert!(!same("1e400", "1e401"));
    }

    // Test vectors: documents that denote the same numbers share a
    // fingerprint; other languages' clients must agree.
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
        let file: Value = serde_json::from_str(include_str!("../../testdata/fingerprints.json"))
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

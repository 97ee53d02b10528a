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

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

use super::model::Fingerprint;

const DOMAIN: &[u8] = b"idem.v1";
/// 2^53: beyond it, IEEE doubles cannot tell neighbouring integers apart.
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
        // `1e300` or `18446744073709551616` arrive here: integral values past
        // 2^53 lost their exact value in parsing, so they are refused too.
        if value.fract() == 0.0 && value.abs() > MAX_SAFE_MAGNITUDE as f64 {
            return Err(E::custom(
                "integral number beyond +-2^53 cannot be compared exactly",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::model::hex;

    // Test vectors: other languages' clients must reproduce these bytes.
    // They are also listed in README.md.
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
    fn client_fingerprints_must_be_32_bytes() {
        assert_eq!(
            from_client_bytes(&[7; 31]),
            Err(FingerprintError::WrongLength(31))
        );
        assert_eq!(from_client_bytes(&[7; 32]), Ok(Fingerprint([7; 32])));
    }
}

//! I-JSON (RFC 7493) parsing, RFC 8785 canonicalization and the idem.v1
//! fingerprint hash, shared by the server (`crates/idemd-domain/src/fingerprint.rs`) and
//! the Rust client (its request selectors), so that both refuse the same
//! documents and hash the same bytes:
//!
//! ```text
//! SHA-256("idem.v1" 0x00 mode 0x00 canonical-bytes)
//! ```
//!
//! I-JSON is enforced because RFC 8785 would otherwise merge distinct
//! requests: `{"a":1,"a":2}` has no single meaning, a lone surrogate has no
//! UTF-8 form, and `9007199254740993` rounds to `9007199254740992`. For the
//! same reason a number written with a fraction or an exponent is refused
//! unless it denotes exactly the value its canonical form writes. Held to the
//! shared vectors, testdata/fingerprints.json, by the server's and the
//! client's tests.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

const DOMAIN: &[u8] = b"idem.v1";
/// 2^53: beyond it, IEEE doubles cannot tell neighbouring integers apart.
const MAX_SAFE_MAGNITUDE: u64 = 1 << 53;

/// Why a document is not I-JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotIJson(pub String);

impl fmt::Display for NotIJson {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for NotIJson {}

/// The value of an I-JSON document.
pub fn parse(document: &str) -> Result<Value, NotIJson> {
    let mut deserializer = serde_json::Deserializer::from_str(document);
    let IJson(value) = serde::Deserialize::deserialize(&mut deserializer)
        .map_err(|error| NotIJson(error.to_string()))?;
    deserializer
        .end()
        .map_err(|error| NotIJson(error.to_string()))?;
    refuse_numbers_a_double_cannot_tell_apart(document)?;
    Ok(value)
}

/// The RFC 8785 canonical form of a value [`parse`] made (or one built of
/// such values).
pub fn canonical(value: &Value) -> Result<Vec<u8>, NotIJson> {
    serde_json_canonicalizer::to_vec(value).map_err(|error| NotIJson(error.to_string()))
}

/// The RFC 8785 canonical form of an I-JSON document.
pub fn canonical_json(document: &str) -> Result<Vec<u8>, NotIJson> {
    canonical(&parse(document)?)
}

/// SHA-256("idem.v1" 0x00 mode 0x00 canonical): the fingerprint of
/// `canonical` bytes in `mode` (`json` or `bytes`).
pub fn fingerprint(mode: &str, canonical: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(DOMAIN);
    hasher.update([0]);
    hasher.update(mode.as_bytes());
    hasher.update([0]);
    hasher.update(canonical);
    hasher.finalize().into()
}

/// [`fingerprint`] in mode `json`.
pub fn json_fingerprint(canonical: &[u8]) -> [u8; 32] {
    fingerprint("json", canonical)
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
fn refuse_numbers_a_double_cannot_tell_apart(document: &str) -> Result<(), NotIJson> {
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

fn refuse_inexact_number(number: &str) -> Result<(), NotIJson> {
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
    Err(NotIJson(format!(
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
}

//! Each method's translation: its JSON body to the protobuf message, and the
//! protobuf answer back to JSON.
//!
//! A map field is bounded before the body is decoded, as the gRPC codec
//! bounds it on the wire (`grpc/codec.rs`): serde would build the whole
//! hash map first (a JSON body of the limit made of tiny entries costs tens
//! of MiB). A first pass walks the JSON along the path of each map field of
//! the request, allocating nothing at the map itself (its keys and values
//! are skipped, not built), and refuses a body with more entries than
//! [`Limits::max_metadata_entries`] the way the handler would have, naming
//! the field. Entries are counted as sent, repeated keys and repeated
//! enclosing objects included.

use prost::Message;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::Status;

use crate::domain::{Error, FieldViolation, Limits};
use crate::grpc::codec::{MapFields, refuse_maps_past};
use crate::grpc::observe::ApiMethod;
use crate::grpc::status::to_status;
use crate::proto;

/// Translates one method's JSON body to its protobuf message and its
/// protobuf answer back to JSON.
pub(super) struct Codec {
    pub(super) request: fn(&[u8]) -> Result<Vec<u8>, Status>,
    pub(super) response: fn(&[u8]) -> Result<Vec<u8>, Status>,
}

pub(super) fn codec_of(method: ApiMethod) -> Option<Codec> {
    fn codec<Req, Resp>() -> Codec
    where
        Req: Message + DeserializeOwned + MapFields,
        Resp: Message + Default + Serialize,
    {
        Codec {
            request: json_to_message::<Req>,
            response: message_to_json::<Resp>,
        }
    }
    Some(match method {
        ApiMethod::Claim => codec::<proto::ClaimRequest, proto::ClaimResponse>(),
        ApiMethod::Renew => codec::<proto::RenewRequest, proto::RenewResponse>(),
        ApiMethod::Complete => codec::<proto::CompleteRequest, proto::CompleteResponse>(),
        ApiMethod::Fail => codec::<proto::FailRequest, proto::FailResponse>(),
        ApiMethod::Lookup => codec::<proto::LookupRequest, proto::LookupResponse>(),
        ApiMethod::Reconcile => codec::<proto::ReconcileRequest, proto::ReconcileResponse>(),
        ApiMethod::ListUnresolved => {
            codec::<proto::ListUnresolvedRequest, proto::ListUnresolvedResponse>()
        }
        ApiMethod::ListOperations => {
            codec::<proto::ListOperationsRequest, proto::ListOperationsResponse>()
        }
        ApiMethod::Forget => codec::<proto::ForgetRequest, proto::ForgetResponse>(),
        ApiMethod::GetPolicy => codec::<proto::GetPolicyRequest, proto::GetPolicyResponse>(),
        ApiMethod::Hold => codec::<proto::HoldRequest, proto::HoldResponse>(),
        ApiMethod::Release => codec::<proto::ReleaseRequest, proto::ReleaseResponse>(),
        ApiMethod::ListHolds => codec::<proto::ListHoldsRequest, proto::ListHoldsResponse>(),
        ApiMethod::Diagnose => codec::<proto::DiagnoseRequest, proto::DiagnoseResponse>(),
        ApiMethod::Unknown => return None,
    })
}

fn json_to_message<M: Message + DeserializeOwned + MapFields>(
    json: &[u8],
) -> Result<Vec<u8>, Status> {
    // An empty body is the empty message, as Connect's own servers take it.
    let json = if json.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        json
    };
    check_map_fields::<M>(json, Limits::default().max_metadata_entries).map_err(to_status)?;
    let message: M = serde_json::from_slice(json).map_err(|error| {
        to_status(Error::InvalidArgument(vec![FieldViolation {
            field: String::new(),
            description: format!("the body is not the request message in JSON: {error}"),
        }]))
    })?;
    Ok(message.encode_to_vec())
}

fn message_to_json<M: Message + Default + Serialize>(bytes: &[u8]) -> Result<Vec<u8>, Status> {
    let message = M::decode(bytes)
        .map_err(|error| to_status(Error::internal_from("an answer did not decode", &error)))?;
    serde_json::to_vec(&message)
        .map_err(|error| to_status(Error::internal_from("an answer did not encode", &error)))
}

/// Refuses a JSON body whose map fields have more than `limit` entries. A
/// body that is not JSON is left to the decoding that follows, which says
/// so in its own words.
fn check_map_fields<M: MapFields>(json: &[u8], limit: usize) -> Result<(), Error> {
    refuse_maps_past::<M>(limit, |field| {
        let path: Vec<&str> = field.name.split('.').collect();
        json_entries_past(json, &path, limit)
    })
}

/// Whether the object at `path` (field names from the top) holds more than
/// `limit` entries in `json`; the walk stops at the first entry past it.
fn json_entries_past(json: &[u8], path: &[&str], limit: usize) -> bool {
    use serde::de::DeserializeSeed;
    let seen = std::cell::Cell::new(0_usize);
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    // An error is either the stop past the limit or a body that is not
    // JSON: `seen` tells which.
    let _ = CountAt {
        path,
        limit,
        seen: &seen,
    }
    .deserialize(&mut deserializer);
    seen.get() > limit
}

/// Counts the entries of the object at `path` below the value it is given.
struct CountAt<'a> {
    path: &'a [&'a str],
    limit: usize,
    seen: &'a std::cell::Cell<usize>,
}

impl<'de> serde::de::DeserializeSeed<'de> for CountAt<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CountAt<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        use serde::de::{Error as _, IgnoredAny};
        match self.path.split_first() {
            // The map itself: its entries counted, nothing of them built.
            None => {
                while map.next_key::<IgnoredAny>()?.is_some() {
                    map.next_value::<IgnoredAny>()?;
                    self.seen.set(self.seen.get().saturating_add(1));
                    if self.seen.get() > self.limit {
                        return Err(A::Error::custom("past the bound"));
                    }
                }
            }
            // A message on the way: the field that leads on is walked,
            // the others skipped. Its keys are field names (few, short).
            Some((next, rest)) => {
                while let Some(key) = map.next_key::<String>()? {
                    if key == *next {
                        map.next_value_seed(CountAt {
                            path: rest,
                            limit: self.limit,
                            seen: self.seen,
                        })?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
        }
        Ok(())
    }

    // Anything but an object (null for an unset message included) holds no
    // entries.
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Complete's JSON body with `entries` metadata entries, then `tail`
    /// inside its result.
    fn complete_json(entries: usize, tail: &str) -> Vec<u8> {
        let metadata: Vec<String> = (0..entries)
            .map(|index| format!("\"k{index}\":\"\""))
            .collect();
        format!(
            "{{\"operationId\":\"op\",\"fence\":\"1\",\"result\":{{\"metadata\":{{{}}}{tail}}}}}",
            metadata.join(",")
        )
        .into_bytes()
    }

    #[test]
    fn a_map_past_its_bound_is_refused_before_the_body_is_decoded() {
        // Past the bound, with a field that does not decode after the map:
        // the count answers first, naming the map; decoding would have
        // refused the body without naming it.
        let body = complete_json(17, ",\"body\":12345");
        let refused = json_to_message::<proto::CompleteRequest>(&body).expect_err("refused");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(refused.message().contains("result.metadata"), "{refused:?}");
        // Within it, decoding has its say.
        let refused =
            json_to_message::<proto::CompleteRequest>(&complete_json(16, ",\"body\":12345"))
                .expect_err("not the message");
        assert!(
            !refused.message().contains("result.metadata"),
            "{refused:?}"
        );
        let within = json_to_message::<proto::CompleteRequest>(&complete_json(16, ""))
            .expect("16 entries are within the bound");
        let decoded = proto::CompleteRequest::decode(within.as_slice()).expect("protobuf");
        assert_eq!(decoded.result.map(|result| result.metadata.len()), Some(16));
    }

    #[test]
    fn entries_are_counted_along_each_path_as_sent() {
        let limit = 16;
        assert!(!json_entries_past(
            &complete_json(16, ""),
            &["result", "metadata"],
            limit
        ));
        assert!(json_entries_past(
            &complete_json(120_000, ""),
            &["result", "metadata"],
            limit
        ));
        // Another field's map of the same name is not this one.
        let elsewhere = br#"{"error":{"metadata":{"a":"","b":"","c":""}}}"#;
        assert!(!json_entries_past(elsewhere, &["result", "metadata"], 2));
        assert!(json_entries_past(elsewhere, &["error", "metadata"], 2));
        // Repeated keys count, as repeated enclosing objects do.
        let repeated = br#"{"result":{"metadata":{"a":"","a":""}},"result":{"metadata":{"b":""}}}"#;
        assert!(json_entries_past(repeated, &["result", "metadata"], 2));
        // Not JSON, or not an object where a map is expected: nothing counted.
        for other in [
            &b"{\"result\":"[..],
            b"[1,2]",
            b"null",
            br#"{"result":{"metadata":null}}"#,
        ] {
            assert!(
                !json_entries_past(other, &["result", "metadata"], 0),
                "{other:?}"
            );
        }
    }
}

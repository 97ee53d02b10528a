//! The API's protobuf codec: prost's, with two differences in decoding.
//!
//! A message that is not protobuf (a bad wire type, a truncated field,
//! invalid UTF-8 in a string) is the caller's error: INVALID_ARGUMENT with
//! ErrorInfo `INVALID_REQUEST`, where prost's codec answers INTERNAL without
//! details, which counts as the server's fault and fires its alerts.
//!
//! A map field is bounded before it is decoded: prost decodes a map into a
//! hash map entry by entry, so a message of the decode limit made of tiny
//! entries (120,000 three-byte keys in 1 MB) costs tens of MiB before the
//! handler can count them. The codec first walks the message's wire format
//! along the path of each map field of the request (a pre-scan: no
//! allocation, linear in the message's bytes, which the decode limit already
//! bounds) and refuses a message with more entries than
//! [`Limits::max_metadata_entries`] the way the handler would have, naming
//! the field. Entries are counted as sent, repeated keys included.

use std::marker::PhantomData;

use bytes::Buf;
use prost::Message;
use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::ProstEncoder;

use crate::domain::{Error, FieldViolation, Limits};
use crate::grpc::status::to_status;
use crate::proto;

/// A map field of a message: its name as the handler's field violations
/// name it, and the field numbers that lead to it from the message.
#[derive(Debug, Clone, Copy)]
pub struct MapField {
    pub name: &'static str,
    pub path: &'static [u32],
}

/// The map fields the codec bounds before decoding a message; none unless
/// said (the answers a client decodes are the server's own).
pub trait MapFields {
    const MAP_FIELDS: &'static [MapField] = &[];
}

impl MapFields for proto::CompleteRequest {
    const MAP_FIELDS: &'static [MapField] = &[MapField {
        name: "result.metadata",
        path: &[3, 3],
    }];
}

impl MapFields for proto::FailRequest {
    const MAP_FIELDS: &'static [MapField] = &[MapField {
        name: "error.metadata",
        path: &[4, 4],
    }];
}

impl MapFields for proto::ReconcileRequest {
    const MAP_FIELDS: &'static [MapField] = &[
        MapField {
            name: "succeeded.metadata",
            path: &[3, 3],
        },
        MapField {
            name: "failed.metadata",
            path: &[4, 4],
        },
    ];
}

impl MapFields for proto::ClaimRequest {}
impl MapFields for proto::RenewRequest {}
impl MapFields for proto::LookupRequest {}
impl MapFields for proto::ListUnresolvedRequest {}
impl MapFields for proto::ListOperationsRequest {}
impl MapFields for proto::ClaimResponse {}
impl MapFields for proto::RenewResponse {}
impl MapFields for proto::CompleteResponse {}
impl MapFields for proto::FailResponse {}
impl MapFields for proto::LookupResponse {}
impl MapFields for proto::ReconcileResponse {}
impl MapFields for proto::ListUnresolvedResponse {}
impl MapFields for proto::ListOperationsResponse {}
impl MapFields for proto::ForgetRequest {}
impl MapFields for proto::ForgetResponse {}
impl MapFields for proto::GetPolicyRequest {}
impl MapFields for proto::GetPolicyResponse {}
impl MapFields for proto::HoldRequest {}
impl MapFields for proto::HoldResponse {}
impl MapFields for proto::ReleaseRequest {}
impl MapFields for proto::ReleaseResponse {}
impl MapFields for proto::ListHoldsRequest {}
impl MapFields for proto::ListHoldsResponse {}
impl MapFields for proto::DiagnoseRequest {}
impl MapFields for proto::DiagnoseResponse {}

/// The codec the generated service and client use (build.rs names it).
#[derive(Debug, Clone)]
pub struct ApiCodec<T, U> {
    _messages: PhantomData<(T, U)>,
}

impl<T, U> Default for ApiCodec<T, U> {
    fn default() -> Self {
        Self {
            _messages: PhantomData,
        }
    }
}

impl<T, U> Codec for ApiCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + MapFields + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ApiDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ApiDecoder {
            _message: PhantomData,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ApiDecoder<U> {
    _message: PhantomData<U>,
}

impl<U: Message + Default + MapFields> Decoder for ApiDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        decode_message(buf).map(Some)
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}

/// One message: its map fields counted first, then decoded.
fn decode_message<U: Message + Default + MapFields>(mut buf: impl Buf) -> Result<U, Status> {
    // tonic hands the whole message in one contiguous buffer.
    if buf.chunk().len() == buf.remaining() {
        check_map_fields::<U>(buf.chunk(), Limits::default().max_metadata_entries)
            .map_err(to_status)?;
    }
    U::decode(&mut buf).map_err(|error| to_status(malformed(&error)))
}

/// The refusal of a message that is not protobuf. prost's error names the
/// message and field where decoding stopped, never a value.
fn malformed(error: &prost::DecodeError) -> Error {
    Error::InvalidArgument(vec![FieldViolation {
        field: String::new(),
        description: format!("the message is not valid protobuf: {error}"),
    }])
}

/// Refuses a message whose map fields have more than `limit` entries.
fn check_map_fields<U: MapFields>(message: &[u8], limit: usize) -> Result<(), Error> {
    refuse_maps_past::<U>(limit, |field| entries_at(message, field.path) > limit)
}

/// The refusal naming each map field of `U` that `past` says holds more
/// than `limit` entries (counted on the wire, protobuf or JSON, before
/// anything is decoded), if any does.
pub(super) fn refuse_maps_past<U: MapFields>(
    limit: usize,
    past: impl Fn(&MapField) -> bool,
) -> Result<(), Error> {
    let violations: Vec<FieldViolation> = U::MAP_FIELDS
        .iter()
        .filter(|field| past(field))
        .map(|field| FieldViolation {
            field: field.name.to_owned(),
            description: format!("at most {limit} entries"),
        })
        .collect();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(violations))
    }
}

/// How many times the field at `path` occurs in `message`, every
/// occurrence of each enclosing message counted (protobuf merges them). A
/// message that does not parse counts what came before the fault: prost's
/// decoding then refuses it with its own words.
fn entries_at(message: &[u8], path: &[u32]) -> usize {
    let Some((&number, rest_of_path)) = path.split_first() else {
        return 0;
    };
    let mut buf = message;
    let mut count = 0_usize;
    while buf.has_remaining() {
        let Ok((tag, wire_type)) = decode_key(&mut buf) else {
            break;
        };
        if tag != number || wire_type != WireType::LengthDelimited {
            if skip_field(wire_type, tag, &mut buf, DecodeContext::default()).is_err() {
                break;
            }
            continue;
        }
        let Some(length) = decode_varint(&mut buf)
            .ok()
            .and_then(|length| usize::try_from(length).ok())
            .filter(|length| *length <= buf.len())
        else {
            break;
        };
        let (field, rest) = buf.split_at(length);
        buf = rest;
        count = count.saturating_add(if rest_of_path.is_empty() {
            1
        } else {
            entries_at(field, rest_of_path)
        });
    }
    count
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn complete_with(entries: usize) -> Vec<u8> {
        proto::CompleteRequest {
            operation_id: "op".into(),
            fence: 1,
            result: Some(proto::Result {
                metadata: (0..entries)
                    .map(|index| (format!("k{index}"), String::new()))
                    .collect::<HashMap<_, _>>(),
                ..proto::Result::default()
            }),
        }
        .encode_to_vec()
    }

    #[test]
    fn map_entries_are_counted_on_the_wire() {
        for entries in [0, 1, 16, 17, 1000] {
            assert_eq!(entries_at(&complete_with(entries), &[3, 3]), entries);
        }
        // Two occurrences of the result are merged by protobuf: both count.
        let mut twice = complete_with(10);
        twice.extend(complete_with(10));
        assert_eq!(entries_at(&twice, &[3, 3]), 20);
        assert!(check_map_fields::<proto::CompleteRequest>(&twice, 16).is_err());
        assert!(check_map_fields::<proto::CompleteRequest>(&complete_with(16), 16).is_ok());
    }

    #[test]
    fn a_map_past_its_bound_is_refused_before_it_is_decoded() {
        // The message: 120,000 three-byte keys, 1.08 MB, which prost
        // alone decodes into a hash map of ~23 MiB for the handler to refuse.
        let message = complete_with(120_000);
        let refused = decode_message::<proto::CompleteRequest>(message.as_slice())
            .expect_err("refused by the count on the wire");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(refused.message().contains("result.metadata"), "{refused:?}");
        let within = decode_message::<proto::CompleteRequest>(complete_with(16).as_slice())
            .expect("16 entries are within the bound");
        assert_eq!(within.result.map(|result| result.metadata.len()), Some(16));
    }

    #[test]
    fn malformed_protobuf_is_the_callers_error() {
        for malformed in [
            &[0x0a, 0x02, 0xff, 0xfe][..],
            &[0x0e, 0x01][..],
            &[0x0a, 0x10, b'a', b'b'][..],
        ] {
            let refused = decode_message::<proto::RenewRequest>(malformed).expect_err("refused");
            assert_eq!(
                refused.code(),
                tonic::Code::InvalidArgument,
                "{malformed:?}"
            );
        }
    }

    #[test]
    fn a_message_that_does_not_parse_is_left_to_prost() {
        let mut truncated = complete_with(40);
        truncated.truncate(truncated.len() / 2);
        let _ = entries_at(&truncated, &[3, 3]);
        assert_eq!(entries_at(&[0xff, 0xff, 0xff], &[3, 3]), 0);
        assert_eq!(entries_at(&[], &[3, 3]), 0);
    }
}

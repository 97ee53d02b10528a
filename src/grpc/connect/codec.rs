//! Each method's translation: its JSON body to the protobuf message, and the
//! protobuf answer back to JSON.

use prost::Message;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::Status;

use crate::domain::{Error, FieldViolation};
use crate::grpc::observe::ApiMethod;
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
        Req: Message + DeserializeOwned,
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
        ApiMethod::Unknown => return None,
    })
}

fn json_to_message<M: Message + DeserializeOwned>(json: &[u8]) -> Result<Vec<u8>, Status> {
    // An empty body is the empty message, as Connect's own servers take it.
    let json = if json.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        json
    };
    let message: M = serde_json::from_slice(json).map_err(|error| {
        Status::from(Error::InvalidArgument(vec![FieldViolation {
            field: String::new(),
            description: format!("the body is not the request message in JSON: {error}"),
        }]))
    })?;
    Ok(message.encode_to_vec())
}

fn message_to_json<M: Message + Default + Serialize>(bytes: &[u8]) -> Result<Vec<u8>, Status> {
    let message = M::decode(bytes)
        .map_err(|error| Status::from(Error::internal_from("an answer did not decode", &error)))?;
    serde_json::to_vec(&message)
        .map_err(|error| Status::from(Error::internal_from("an answer did not encode", &error)))
}

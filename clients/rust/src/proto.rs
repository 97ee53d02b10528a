//! The API's generated types and client, compiled by build.rs from the
//! repository's proto/idem/v1/idempotency.proto.
#![allow(clippy::all, unreachable_pub, missing_docs)]

tonic::include_proto!("idem.v1");

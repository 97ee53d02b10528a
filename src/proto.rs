//! The API's generated types and the file descriptor set reflection serves;
//! build.rs writes both to OUT_DIR from proto/idem/v1.
#![allow(clippy::all, unreachable_pub, missing_docs)]

tonic::include_proto!("idem.v1");
include!(concat!(env!("OUT_DIR"), "/idem.v1.serde.rs"));

pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("idem_descriptor");

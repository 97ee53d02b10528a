//! Compiles the proto with protox (pure Rust, no system protoc) and writes the
//! file descriptor set that server reflection serves.

use std::{env, fs, path::PathBuf};

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);

    // error_details.proto is compiled into the descriptor set too, so that
    // reflection lets grpcurl and friends decode google.rpc error details.
    let file_descriptors = protox::compile(
        [
            "idem/v1/idempotency.proto",
            "google/rpc/error_details.proto",
        ],
        ["proto"],
    )?;
    fs::write(
        out_dir.join("idem_descriptor.bin"),
        file_descriptors.encode_to_vec(),
    )?;

    // The well-known types come from pbjson-types, which gives them the
    // proto3 JSON mapping ("1.5s", RFC 3339) the Connect handler speaks.
    // The API's codec is prost's with its own decoding: malformed protobuf is
    // the caller's error and map fields are bounded before they are decoded
    // (src/grpc/codec.rs).
    tonic_prost_build::configure()
        .codec_path("crate::grpc::codec::ApiCodec")
        .build_client(true)
        .build_server(true)
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .extern_path(".google.rpc", "::tonic_types::pb")
        .compile_fds(file_descriptors.clone())?;

    // serde impls in the canonical proto3 JSON mapping, for the API's
    // package only (google.rpc details travel as base64 bytes in Connect).
    pbjson_build::Builder::new()
        .register_descriptors(&file_descriptors.encode_to_vec())?
        .out_dir(&out_dir)
        .build(&[".idem.v1"])?;
    Ok(())
}

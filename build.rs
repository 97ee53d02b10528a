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

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .extern_path(".google.rpc", "::tonic_types::pb")
        .compile_fds(file_descriptors)?;
    Ok(())
}

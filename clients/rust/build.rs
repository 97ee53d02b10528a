//! Compiles idemd's proto (the repository's `proto/`, two levels up) with
//! protox (pure Rust, no system protoc), as the server's build.rs does. Only
//! the client is generated; google.rpc details come from tonic-types.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../../proto");
    let file_descriptors = protox::compile(["idem/v1/idempotency.proto"], ["../../proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_fds(file_descriptors)?;
    Ok(())
}

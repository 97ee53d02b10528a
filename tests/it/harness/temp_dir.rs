//! Temporary directories that go when the test does, and the fresh ids that name them.

use std::path::{Path, PathBuf};

/// A directory under the system's temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

/// A fresh UUIDv7: names temporary files, tenants and unknown operation ids in tests.
/// The one place tests draw an id (clippy.toml keeps `Uuid::now_v7` out of the code).
#[expect(
    clippy::disallowed_methods,
    reason = "tests name their own files and tenants"
)]
pub fn fresh_uuid() -> uuid::Uuid {
    uuid::Uuid::now_v7()
}

impl TempDir {
    pub fn new() -> Self {
        let path = std::env::temp_dir().join(format!("idemd-test-{}", fresh_uuid()));
        std::fs::create_dir_all(&path).expect("temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

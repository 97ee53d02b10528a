//! The domain is pure: it reads no clock and draws no id, it is handed both.
//! clippy.toml bans the clocks everywhere; the id draw cannot be banned there
//! while tests outside the domain name their temporary files with it, so
//! this test holds the domain's own sources to both rules.

use std::path::{Path, PathBuf};

/// Calls that read this host's clock or a random source.
const IMPURE: &[&str] = &[
    "Utc::now",
    "SystemTime::now",
    "Instant::now",
    "Uuid::now_v7",
    "Uuid::new_v4",
    "thread_rng",
];

fn sources(directory: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(directory).expect("the domain's sources are readable");
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn the_domain_reads_no_clock_and_draws_no_id() {
    let domain = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&domain, &mut files);
    assert!(files.len() > 10, "found only {files:?}");
    let this = domain.join("purity_tests.rs");
    for file in files.iter().filter(|file| **file != this) {
        let text = std::fs::read_to_string(file).expect("a source file reads");
        for call in IMPURE {
            assert!(!text.contains(call), "{} calls {call}", file.display());
        }
    }
}

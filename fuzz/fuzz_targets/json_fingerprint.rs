//! Arbitrary bytes as a `json_payload` (and as a `bytes_payload`): never a
//! panic. A document that is accepted has a canonical form that is its own
//! canonical form and has the document's fingerprint, and whitespace around
//! the document changes nothing: equal canonical forms, equal fingerprints.

#![no_main]

use idemd::domain::fingerprint;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = fingerprint::of_bytes(data);
    let Ok(document) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(canonical) = fingerprint::canonical_json(document) else {
        assert!(fingerprint::of_json(document).is_err());
        return;
    };
    let fingerprint = fingerprint::of_json(document).expect("canonicalized, so accepted");
    let canonical = String::from_utf8(canonical).expect("RFC 8785 output is UTF-8");
    assert_eq!(
        fingerprint::canonical_json(&canonical).as_deref(),
        Ok(canonical.as_bytes()),
        "the canonical form of {document:?} is not its own canonical form"
    );
    assert_eq!(fingerprint::of_json(&canonical), Ok(fingerprint));
    let spaced = format!(" \n\t{document}\r\n ");
    assert_eq!(fingerprint::of_json(&spaced), Ok(fingerprint));
});

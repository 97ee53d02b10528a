//! Page tokens: any string is parsed without a panic, and what parses is a
//! token `encode` writes, character for character; any (created_at,
//! operation_id) is encoded, and decodes to itself exactly when created_at
//! lies in the years every store accepts.

#![no_main]

use arbitrary::Arbitrary;
use chrono::{DateTime, Datelike, Utc};
use idemd::domain::OperationId;
use idemd::grpc::page_token;
use libfuzzer_sys::fuzz_target;
use uuid::Uuid;

#[derive(Debug, Arbitrary)]
enum Input {
    Text(String),
    Position { micros: i64, operation_id: [u8; 16] },
}

fuzz_target!(|input: Input| match input {
    Input::Text(text) => {
        if let Some((created_at, operation_id)) = page_token::parse(&text) {
            assert_eq!(page_token::encode(created_at, operation_id), text);
        }
    }
    Input::Position {
        micros,
        operation_id,
    } => {
        let Some(created_at) = DateTime::<Utc>::from_timestamp_micros(micros) else {
            return;
        };
        let operation_id = OperationId(Uuid::from_bytes(operation_id));
        let token = page_token::encode(created_at, operation_id);
        let accepted = (2000..=9999).contains(&created_at.year());
        match page_token::parse(&token) {
            Some(parsed) => {
                assert!(accepted, "{created_at} is outside the range");
                assert_eq!(parsed, (created_at, operation_id));
            }
            None => assert!(!accepted, "{created_at} is in range but refused"),
        }
    }
});

//! Invariants: terminal records never change, and a model checker that plays
//! random event sequences against the state machine.

mod model_checker;
mod terminal_records;

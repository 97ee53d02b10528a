//! How a write is refused: the error, and for stale and late writes the
//! history entry that records the refusal.

use crate::error::{Error, Refusal};
use crate::model::{Fence, HistoryEvent, NewHistoryEntry, OperationRecord};

use super::decision::Decision;

pub(super) fn refuse_stale(
    record: &OperationRecord,
    stale_fence: Fence,
    rpc: &'static str,
) -> Decision {
    let history = refusal_history(record, HistoryEvent::StaleWriteRefused, stale_fence, rpc);
    Decision::refuse_and_record(
        Error::LeaseLost {
            operation_id: record.operation_id,
            current_fence: record.fence,
            state: record.state,
        },
        history,
    )
}

pub(super) fn refusal_history(
    record: &OperationRecord,
    event: HistoryEvent,
    fence: Fence,
    rpc: &'static str,
) -> NewHistoryEntry {
    NewHistoryEntry {
        event,
        from_state: Some(record.state),
        to_state: record.state,
        fence,
        attempt: record.attempt,
        detail: rpc.to_owned(),
    }
}

pub(super) fn refused(refusal: Refusal, record: &OperationRecord) -> Error {
    Error::Refused {
        refusal,
        operation_id: record.operation_id,
        state: record.state,
    }
}

pub(super) fn refuse(refusal: Refusal, record: &OperationRecord) -> Decision {
    Decision::refuse(refused(refusal, record))
}

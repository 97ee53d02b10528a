//! The four tools: their descriptions (written for the agent that reads
//! them to choose), and each call as one or a few RPCs.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};
use tracing::info;

use super::answer;
use super::arguments::{
    ArgumentError, DiagnoseArguments, ListUnresolvedArguments, LookupArguments, ReconcileArguments,
};
use crate::app::ops::connect::Server;
use crate::app::ops::lookup::{fetch_with_history, operation_json};
use crate::app::ops::reconcile::consequence;
use crate::proto::{LookupRequest, Operation};

/// Result bodies up to this size are returned (base64 in the operation's
/// JSON, and as text when they are text); larger ones only by their size, so
/// that one lookup cannot flood the agent's context.
const INLINE_BODY_BYTES: usize = 16 * 1024;

const INSTRUCTIONS: &str = "idemd makes a side effect (a payment, a message, an order) happen \
    at most once per logical request. These tools read its record and advise; none of them \
    executes the effect. Rules: never execute or re-send an effect whose operation is \
    IN_PROGRESS (the caller was told Pending) or UNKNOWN: the outcome is open and a second \
    execution may duplicate it. Look first (lookup), then diagnose with what you observed; follow \
    the diagnosis' plan in order and stop where it says hand over (verdict VERDICT_ESCALATE). \
    Reconcile only from the provider's own evidence, with confirm: true, after whoever you act \
    for agreed. A refusal (isError) carries the server's gRPC code and ErrorInfo reason: act on \
    the reason (EVIDENCE_CARRIES_SECRET: remove the secret; PLAN_EXCEEDS_*: stop and hand over), \
    never retry it unchanged.";

const LOOKUP: &str = "Read one operation of your tenant: its state (IN_PROGRESS, SUCCEEDED, \
    FAILED, RETRY_WAIT, UNKNOWN, EXPIRED), fence, attempts, deadlines, stored result or error, \
    and a plain answer to 'did it happen, is a retry safe?'. Name it by operation_id, or by \
    operation and key. Call it first whenever a caller timed out, saw an error or suspects a \
    duplicate; it changes nothing. Result bodies come base64 in the operation JSON (and as \
    result_body_text when they are text); bodies over 16 KiB are left out, with their size. \
    Never execute the effect again because of what you read while the state is IN_PROGRESS or \
    UNKNOWN: the outcome is open; diagnose it instead.";

const LIST_UNRESOLVED: &str = "List the operations that need reconciliation, oldest first: \
    UNKNOWN ones, and IN_PROGRESS ones whose owner's lease expired, each with its operation_id \
    and fence (for reconcile). Changes nothing. Pass next_page_token back as page_token for the \
    next page. Offered only to a credential with the reconcile scope. Never execute their \
    effects again: look each up at the provider and reconcile from that evidence.";

const DIAGNOSE: &str = "Ask idemd what the evidence about one operation means and what the next \
    safe move is: a diagnosis (cause, layer, meaning), an ordered plan of moves, checks that \
    would confirm it, a handoff record and a confidence scored from independent observations. \
    Give what you observed in evidence (symptom, the status code and ErrorInfo reason you saw, \
    the request you would send now, what the provider showed and how long ago), your limits in \
    constraints (authority, reversible_only, attempt_budget, wait_budget_seconds) and your \
    success criterion. It changes nothing and stores nothing. Follow the plan in order; if the \
    verdict is VERDICT_ESCALATE, do only what the plan says (look, hand over) and report what \
    'missing' names. Never execute the effect while the operation is IN_PROGRESS or UNKNOWN \
    unless the plan says so. Never put a secret in the evidence (keys, tokens, card numbers): \
    it is refused INVALID_ARGUMENT EVIDENCE_CARRIES_SECRET. A plan beyond your scope or \
    constraints is refused PERMISSION_DENIED PLAN_EXCEEDS_*: stop there and hand over; never \
    widen your own limits to get past it.";

const RECONCILE: &str = "Resolve an operation whose outcome is unknown from the provider's own \
    evidence: SUCCEEDED stores the result the provider shows (callers then replay it), FAILED \
    stores the provider's terminal failure, NOT_APPLIED (the effect certainly did not happen) \
    grants one more attempt. It changes the operation for every caller and cannot be undone. \
    REQUIRES confirm: true; without it nothing is sent and the answer says what the call would \
    do. Set confirm only after you looked the effect up at the provider (by the operation_id, \
    its idempotency key there), after a diagnose plan says to reconcile, and after whoever you \
    act for agreed. Never execute the effect yourself on an UNKNOWN or IN_PROGRESS operation: \
    reconcile it. Pass expected_fence as lookup or list_unresolved gave it: if the operation \
    moved since, the call is refused (ABORTED LEASE_LOST), so look it up again. The same call \
    re-sent (its answer lost) is answered the same and writes nothing twice. NOT_APPLIED and \
    FAILED are refused while an attempt may still be running (FAILED_PRECONDITION \
    ATTEMPT_STILL_RUNNING): wait, never guess. Offered only to a credential with the reconcile \
    scope.";

#[derive(Clone)]
pub(super) struct Tools {
    server: Server,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Tools {
    /// The tools the credential may use: list_unresolved and reconcile
    /// only with the reconcile scope (the server refuses them otherwise, so
    /// offering them would only invite refusals).
    pub(super) fn new(server: Server, reconcile_scope: bool) -> Self {
        let mut tool_router = Self::tool_router();
        if !reconcile_scope {
            tool_router.remove_route("list_unresolved");
            tool_router.remove_route("reconcile");
        }
        Self {
            server,
            tool_router,
        }
    }

    #[tool(
        description = LOOKUP,
        annotations(title = "Look up an operation", read_only_hint = true, open_world_hint = false)
    )]
    async fn lookup(&self, Parameters(arguments): Parameters<LookupArguments>) -> CallToolResult {
        let target = match arguments.target() {
            Ok(target) => target,
            Err(error) => return refused(error),
        };
        let mut server = self.server.clone();
        let (operation, history) = if arguments.include_history {
            match fetch_with_history(&mut server, target.into(), "").await {
                Ok((operation, history)) => (operation, Some(history)),
                Err(status) => return called("lookup", "Lookup", Err(status)),
            }
        } else {
            let request = server.request(LookupRequest {
                target: Some(target.into()),
                ..Default::default()
            });
            match server.client.lookup(request).await {
                Ok(response) => (response.into_inner().operation.unwrap_or_default(), None),
                Err(status) => return called("lookup", "Lookup", Err(status)),
            }
        };
        let document = operation_document(operation).and_then(|mut document| {
            if let Some(history) = history {
                document["history"] = serde_json::to_value(history)?;
            }
            Ok(document)
        });
        called("lookup", "Lookup", Ok(document))
    }

    #[tool(
        description = LIST_UNRESOLVED,
        annotations(title = "List unresolved operations", read_only_hint = true, open_world_hint = false)
    )]
    async fn list_unresolved(
        &self,
        Parameters(arguments): Parameters<ListUnresolvedArguments>,
    ) -> CallToolResult {
        let mut server = self.server.clone();
        let request = server.request(arguments.request());
        let outcome = server
            .client
            .list_unresolved(request)
            .await
            .map(|response| serde_json::to_value(response.into_inner()));
        called("list_unresolved", "ListUnresolved", outcome)
    }

    #[tool(
        description = DIAGNOSE,
        annotations(title = "Diagnose an operation", read_only_hint = true, open_world_hint = false)
    )]
    async fn diagnose(
        &self,
        Parameters(arguments): Parameters<DiagnoseArguments>,
    ) -> CallToolResult {
        let request = match arguments.request() {
            Ok(request) => request,
            Err(error) => return refused(error),
        };
        let mut server = self.server.clone();
        let request = server.request(request);
        let outcome = server
            .client
            .diagnose(request)
            .await
            .map(|response| serde_json::to_value(response.into_inner()));
        called("diagnose", "Diagnose", outcome)
    }

    #[tool(
        description = RECONCILE,
        annotations(
            title = "Reconcile an unknown outcome",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn reconcile(
        &self,
        Parameters(arguments): Parameters<ReconcileArguments>,
    ) -> CallToolResult {
        let resolution = match arguments.resolution() {
            Ok(resolution) => resolution,
            Err(error) => return refused(error),
        };
        if !arguments.confirm {
            info!(
                tool = "reconcile",
                outcome = "not confirmed",
                "mcp tool call"
            );
            return answer::refused_here(
                "CONFIRMATION_REQUIRED",
                format!(
                    "not confirmed: nothing was sent. Reconciling operation {} at fence {}: {}. \
                     Call again with confirm: true only if the provider's evidence shows exactly \
                     that and whoever you act for agreed.",
                    arguments.operation_id,
                    arguments.expected_fence,
                    consequence(&resolution),
                ),
            );
        }
        let mut server = self.server.clone();
        let request = server.request(arguments.request(resolution));
        let outcome = server.client.reconcile(request).await.map(|response| {
            // The proto's JSON, as lookup's: the state by its enum name,
            // the fence as a string.
            let mut document = serde_json::to_value(response.into_inner())?;
            document["operationId"] = json!(arguments.operation_id);
            Ok(document)
        });
        called("reconcile", "Reconcile", outcome)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("idemd", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// The operation as `idemd ops lookup -o json` prints it (the answer, the
/// proto's JSON, the body as text), with a large body left out.
fn operation_document(mut operation: Operation) -> Result<Value, serde_json::Error> {
    let mut omitted_bytes = None;
    if let Some(result) = operation.result.as_mut()
        && result.body.len() > INLINE_BODY_BYTES
    {
        omitted_bytes = Some(result.body.len());
        result.body = Vec::new();
    }
    let mut document =
        operation_json(&operation).map_err(|error| serde::ser::Error::custom(error.to_string()))?;
    if let Some(bytes) = omitted_bytes {
        document["result_body_text"] = Value::Null;
        document["result_body_omitted"] = json!({
            "bytes": bytes,
            "why": "larger than 16 KiB; read it with `idemd ops lookup` or a client",
        });
    }
    Ok(document)
}

fn refused(error: ArgumentError) -> CallToolResult {
    answer::refused_here("INVALID_TOOL_ARGUMENTS", error.0)
}

/// The answer to one call, logged by its tool and outcome only: arguments
/// and results may carry payloads.
fn called(
    tool: &'static str,
    rpc: &str,
    outcome: Result<Result<Value, serde_json::Error>, tonic::Status>,
) -> CallToolResult {
    match outcome {
        Ok(Ok(document)) => {
            info!(tool, outcome = "ok", "mcp tool call");
            answer::success(document)
        }
        Ok(Err(error)) => {
            info!(tool, outcome = "internal", "mcp tool call");
            answer::internal(error)
        }
        Err(status) => {
            info!(tool, outcome = "refused", code = ?status.code(), "mcp tool call");
            answer::refused_by_server(rpc, &status)
        }
    }
}

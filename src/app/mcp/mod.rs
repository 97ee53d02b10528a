//! `idemd mcp`: an MCP server on stdio for agents. A thin client of the
//! gRPC API with the credential `idemd ops` uses, so every rule (scopes,
//! fences, refusals, escalation) is the server's; this only offers the
//! tools, turns their arguments into requests and hands back what the server
//! answered, refusals included, as JSON.
//!
//! stdout is the MCP channel and nothing else: logs go to stderr (the
//! telemetry's writer), and no tool argument or result is logged, since
//! evidence and results may carry payloads.

mod answer;
mod arguments;
mod tools;

use rmcp::ServiceExt;
use tonic::Code;
use tracing::info;

use super::ops::connect::Server;
use crate::config::OpsConnectionArgs;
use crate::error::BoxError;
use crate::proto::ListUnresolvedRequest;
use tools::Tools;

pub(crate) async fn run_mcp(connection: OpsConnectionArgs) -> Result<(), BoxError> {
    let server = Server::connect(&connection).await?;
    let reconcile_scope = has_reconcile_scope(&server).await?;
    info!(
        addr = %connection.addr,
        reconcile_tools = reconcile_scope,
        "idemd mcp serving on stdio"
    );
    let running = Tools::new(server, reconcile_scope)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| format!("the MCP client's initialize failed: {error}"))?;
    let reason = running.waiting().await?;
    info!(?reason, "idemd mcp stopped");
    Ok(())
}

/// Whether the credential may list and reconcile: the tools that need the
/// reconcile scope are offered only then. Asked of the server with the
/// smallest reconcile-scoped read there is (one unresolved operation), so
/// the answer is the server's own scope check, never a guess from the
/// token. Any other refusal (a revoked token, no server) ends start-up: an
/// agent could do nothing with it, and an MCP client shows stderr.
async fn has_reconcile_scope(server: &Server) -> Result<bool, BoxError> {
    let mut client = server.client.clone();
    let request = server.request(ListUnresolvedRequest {
        page_size: 1,
        ..Default::default()
    });
    match client.list_unresolved(request).await {
        Ok(_) => Ok(true),
        Err(status) if status.code() == Code::PermissionDenied => Ok(false),
        Err(status) => Err(format!(
            "the server refused the credential check (ListUnresolved): {:?}: {}",
            status.code(),
            status.message()
        )
        .into()),
    }
}

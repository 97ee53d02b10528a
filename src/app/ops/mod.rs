//! `idemd ops …`: support tools that talk to a running server over gRPC, as
//! any client does, with a bearer token. Thin on purpose: the server decides
//! everything (scopes, filters, whether a reconciliation is allowed); these
//! commands only call the RPCs, ask before a write, and print.

mod bulk;
// `idemd mcp` (src/app/mcp) is a client of the same API: it connects,
// decodes refusals and reads operations as these commands do.
pub(in crate::app) mod connect;
mod diagnose;
pub(in crate::app) mod failure;
mod forget;
mod hold;
mod list;
pub(in crate::app) mod lookup;
mod policy;
pub(in crate::app) mod reconcile;
mod render;
mod show;

use crate::config::OpsCommand;
use crate::error::BoxError;

pub use failure::OpsFailure;

pub(crate) async fn run_ops(command: OpsCommand) -> Result<(), BoxError> {
    match command {
        OpsCommand::Lookup {
            operation_id,
            operation,
            key,
            tenant,
            connection,
            output,
        } => {
            let target = lookup::target(operation_id, operation, key)?;
            let mut server = connect::Server::connect(&connection).await?;
            lookup::run(&mut server, target, tenant.unwrap_or_default(), output).await
        }
        OpsCommand::List {
            filter,
            order,
            limit,
            page_token,
            all,
            connection,
            output,
        } => {
            let mut server = connect::Server::connect(&connection).await?;
            let pages = list::Pages {
                page_size: limit,
                page_token,
                all,
            };
            list::list_operations(&mut server, filter, order, pages, output).await
        }
        OpsCommand::Unresolved {
            operation,
            limit,
            page_token,
            all,
            connection,
            output,
        } => {
            let mut server = connect::Server::connect(&connection).await?;
            let pages = list::Pages {
                page_size: limit,
                page_token,
                all,
            };
            list::list_unresolved(&mut server, operation.unwrap_or_default(), pages, output).await
        }
        OpsCommand::Show {
            operation_id,
            follow,
            interval,
            connection,
            output,
        } => {
            let mut server = connect::Server::connect(&connection).await?;
            show::run(
                &mut server,
                operation_id,
                follow.then_some(interval),
                output,
            )
            .await
        }
        OpsCommand::Reconcile {
            operation_id,
            filter,
            dry_run,
            limit,
            succeeded,
            failed,
            not_applied,
            result_file,
            content_type,
            code,
            message,
            expected_fence,
            tenant,
            yes,
            connection,
            output,
        } => {
            // Read the evidence before connecting: a typo in a path fails at once.
            let resolution = reconcile::resolution(
                (succeeded, failed, not_applied),
                result_file,
                content_type,
                code,
                message,
            )?;
            let Some(operation_id) = operation_id else {
                // And the filter's states: another state fails at once too.
                let plan = bulk::BulkPlan {
                    filter: bulk::unresolved_filter(&filter.unwrap_or_default())?,
                    resolution,
                    limit,
                    dry_run,
                    confirmed: yes,
                };
                let mut server = connect::Server::connect(&connection).await?;
                return bulk::run(&mut server, plan, output).await;
            };
            let mut server = connect::Server::connect(&connection).await?;
            let plan = reconcile::Plan {
                operation_id,
                resolution,
                expected_fence,
                tenant: tenant.unwrap_or_default(),
                confirmed: yes,
            };
            reconcile::run(&mut server, plan, output).await
        }
        OpsCommand::Forget {
            operation_id,
            reason,
            expected_fence,
            tenant,
            yes,
            connection,
            output,
        } => {
            let mut server = connect::Server::connect(&connection).await?;
            let plan = forget::Plan {
                operation_id,
                reason,
                expected_fence,
                tenant: tenant.unwrap_or_default(),
                confirmed: yes,
            };
            forget::run(&mut server, plan, output).await
        }
        OpsCommand::Hold {
            operation,
            whole_tenant,
            reason,
            retry_after,
            tenant,
            connection,
            output,
        } => {
            let target = hold::Target {
                operation,
                whole_tenant,
                tenant: tenant.unwrap_or_default(),
                reason,
            };
            let mut server = connect::Server::connect(&connection).await?;
            hold::hold(&mut server, target, retry_after, output).await
        }
        OpsCommand::Release {
            operation,
            whole_tenant,
            reason,
            tenant,
            connection,
            output,
        } => {
            let target = hold::Target {
                operation,
                whole_tenant,
                tenant: tenant.unwrap_or_default(),
                reason,
            };
            let mut server = connect::Server::connect(&connection).await?;
            hold::release(&mut server, target, output).await
        }
        OpsCommand::Diagnose {
            operation_id,
            operation,
            key,
            tenant,
            evidence,
            connection,
            output,
        } => {
            let target = lookup::target(operation_id, operation, key)?;
            let request = diagnose::request(target, tenant.unwrap_or_default(), *evidence)?;
            let mut server = connect::Server::connect(&connection).await?;
            diagnose::run(&mut server, request, output).await
        }
        OpsCommand::Holds {
            tenant,
            connection,
            output,
        } => {
            let mut server = connect::Server::connect(&connection).await?;
            hold::list(&mut server, tenant, output).await
        }
        OpsCommand::Policy {
            operation,
            connection,
            output,
        } => {
            let mut server = connect::Server::connect(&connection).await?;
            policy::run(&mut server, operation, output).await
        }
    }
}

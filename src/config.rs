//! Configuration: clap flags, each with an environment variable, so that Helm
//! values map to env vars one to one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Bytes of request messages in flight on a replica by default. A call
/// costs about four times its message in memory while it runs (the body's
/// buffer, the decoded message, the domain command, the statement's
/// binds): 64 MiB of messages is about 256 MiB of memory at worst, within
/// the chart's default limit beside the caches and the pool.
pub const DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT: usize = 64 * 1024 * 1024;

#[derive(Debug, Parser)]
#[command(
    name = "idemd",
    version,
    about = "At most one business effect per logical request"
)]
pub struct Cli {
    #[command(flatten)]
    pub database: DatabaseArgs,

    /// Log output: `text` for people, `json` for collectors.
    #[arg(long, env = "IDEMD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the gRPC API.
    Serve(Box<ServeArgs>),
    /// Apply database migrations and exit (safe to run from several places at once).
    Migrate,
    /// Manage tenants and their bearer tokens.
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Read the audit trail of tenant and credential changes.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Check an operation policy file (--policy-file) before deploying it.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Support tools against a running server over gRPC: did it happen, and
    /// is it safe to retry? Exit codes: 0 done, 1 refused by the server,
    /// 2 usage, 3 server unreachable, 4 not found, 5 declined at the prompt,
    /// 6 not all reconciled (reconcile --filter), 130 interrupted.
    #[command(subcommand)]
    Ops(OpsCommand),
    /// An MCP server on stdio for agents: lookup, list_unresolved and
    /// diagnose, and reconcile when the credential has the reconcile scope
    /// (each call confirmed explicitly). A client of a running server, as
    /// `idemd ops` is: the server enforces every scope.
    Mcp {
        #[command(flatten)]
        connection: OpsConnectionArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// One operation, by id or by `--operation NAME --key KEY`: its state,
    /// a plain answer to "is it safe to retry?", and its whole history.
    Lookup {
        /// The server's id of the operation.
        #[arg(required_unless_present = "operation", conflicts_with_all = ["operation", "key"])]
        operation_id: Option<String>,
        /// The caller's operation name (with --key).
        #[arg(long, requires = "key")]
        operation: Option<String>,
        /// The caller's idempotency key (with --operation).
        #[arg(long, requires = "operation")]
        key: Option<String>,
        /// Another tenant's operation, by the tenant's name (admin scope).
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Operations matching a filter (docs/api.md, ListOperations), one page
    /// or, with --all, every page.
    List {
        /// E.g. `state:unknown op:payments.*`, `is:conflicted`,
        /// `last:taken_over`; empty: every operation.
        #[arg(long, default_value = "")]
        filter: String,
        #[arg(long, value_enum, default_value_t = OpsOrder::Oldest)]
        order: OpsOrder,
        /// Operations per page (the server clamps it to 1000).
        #[arg(long)]
        limit: Option<u32>,
        /// A previous listing's next page token.
        #[arg(long, default_value = "")]
        page_token: String,
        /// Follow the page tokens to the last page.
        #[arg(long, conflicts_with = "page_token")]
        all: bool,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Operations that need reconciliation (ListUnresolved), oldest first.
    Unresolved {
        /// Only this operation name.
        #[arg(long)]
        operation: Option<String>,
        /// Operations per page (the server clamps it to 1000).
        #[arg(long)]
        limit: Option<u32>,
        /// A previous listing's next page token.
        #[arg(long, default_value = "")]
        page_token: String,
        /// Follow the page tokens to the last page.
        #[arg(long, conflicts_with = "page_token")]
        all: bool,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// One operation and its history, as lookup prints them; with --follow,
    /// each new history entry as it comes, until the operation is terminal.
    Show {
        /// The server's id of the operation.
        operation_id: String,
        /// Keep printing new history entries; exit 0 once the operation is
        /// SUCCEEDED, FAILED or EXPIRED and every entry is printed.
        #[arg(long)]
        follow: bool,
        /// How often --follow asks the server (`1s`, `500ms`).
        #[arg(long, requires = "follow", value_parser = humantime::parse_duration, default_value = "1s")]
        interval: Duration,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        /// `json`: one JSON document a line (the operation, then each entry).
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Resolve an operation from outside evidence (Reconcile); says what
    /// will happen and asks before acting, unless --yes. With --filter
    /// instead of an id: every unresolved operation the filter finds.
    #[command(group(
        clap::ArgGroup::new("resolution")
            .required(true)
            .args(["succeeded", "failed", "not_applied"])
    ))]
    Reconcile {
        #[arg(required_unless_present = "filter")]
        operation_id: Option<String>,
        /// Every unresolved operation this filter finds (docs/api.md;
        /// `state:unresolved` is added when it names no state), each at the
        /// fence it was listed with.
        #[arg(long, conflicts_with_all = ["operation_id", "expected_fence"])]
        filter: Option<String>,
        /// With --filter: list, show the sample and the consequence, change
        /// nothing.
        #[arg(long, requires = "filter", conflicts_with = "yes")]
        dry_run: bool,
        /// With --filter: at most this many operations, oldest first.
        #[arg(long, requires = "filter")]
        limit: Option<u32>,
        /// The effect happened: store the result in --result-file.
        #[arg(long, requires = "result_file")]
        succeeded: bool,
        /// The effect did not happen and never will: store this failure.
        #[arg(long, requires_all = ["code", "message"])]
        failed: bool,
        /// The effect did not happen: grant one more attempt.
        #[arg(long)]
        not_applied: bool,
        /// The result body, with --succeeded.
        #[arg(long, requires = "succeeded")]
        result_file: Option<PathBuf>,
        /// The result's content type, with --succeeded.
        #[arg(long, requires = "succeeded", default_value = "application/json")]
        content_type: String,
        /// The failure code, with --failed.
        #[arg(long, requires = "failed")]
        code: Option<String>,
        /// The failure message, with --failed.
        #[arg(long, requires = "failed")]
        message: Option<String>,
        /// The fence to reconcile at; default: the fence a Lookup reads now.
        #[arg(long)]
        expected_fence: Option<u64>,
        /// Another tenant's operation, by the tenant's name (admin scope
        /// besides reconcile).
        #[arg(long)]
        tenant: Option<String>,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Turn an ended operation into a tombstone now (Forget, admin scope):
    /// its result is dropped and the caller's next Claim gets
    /// RESULT_EXPIRED. Says what will happen and asks, unless --yes.
    Forget {
        operation_id: String,
        /// Why (a deletion request, a poisoned result): kept in the history
        /// and the audit log.
        #[arg(long)]
        reason: String,
        /// The fence to forget at; default: the fence a Lookup reads now.
        #[arg(long)]
        expected_fence: Option<u64>,
        /// Another tenant's operation, by the tenant's name.
        #[arg(long)]
        tenant: Option<String>,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Stop new owners of an operation name, or of a whole tenant (Hold,
    /// admin scope): new operations and new attempts are told Pending while
    /// replays, running owners and reconciliation go on. Audited.
    Hold {
        /// The operation name to hold.
        operation: Option<String>,
        /// Hold every operation of the tenant instead of one name.
        #[arg(long)]
        whole_tenant: bool,
        /// Why (duplicates still occur, requests stuck in progress): kept
        /// with the hold and in the audit log.
        #[arg(long)]
        reason: String,
        /// What a held Claim is told to wait before it claims again (the
        /// server's default: 30s).
        #[arg(long, value_parser = humantime::parse_duration)]
        retry_after: Option<Duration>,
        /// Another tenant, by name.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// End a hold (Release, admin scope): new owners start again. Audited.
    Release {
        /// The operation name held.
        operation: Option<String>,
        /// The whole tenant's hold.
        #[arg(long)]
        whole_tenant: bool,
        /// Why (drained and reconciled): kept in the audit log.
        #[arg(long)]
        reason: String,
        /// Another tenant, by name.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// The holds in force (ListHolds): the caller's tenant's, or an admin's
    /// across tenants.
    Holds {
        /// One tenant's, by name (admin).
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// What the evidence about one operation means and the next safe moves
    /// (Diagnose): a diagnosis, a plan, the checks that confirm it, a
    /// handoff record and a confidence. Reads only. Evidence carrying a
    /// secret is refused; a plan beyond the token's scopes or the given
    /// constraints is refused (PLAN_EXCEEDS_*).
    Diagnose {
        /// The server's id of the operation.
        #[arg(required_unless_present = "operation", conflicts_with_all = ["operation", "key"])]
        operation_id: Option<String>,
        /// The caller's operation name (with --key).
        #[arg(long, requires = "key")]
        operation: Option<String>,
        /// The caller's idempotency key (with --operation).
        #[arg(long, requires = "operation")]
        key: Option<String>,
        /// Another tenant's operation, by the tenant's name (admin scope).
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        evidence: Box<DiagnoseEvidenceArgs>,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// The effective policy for an operation name (GetPolicy): the defaults
    /// and ceilings its first Claim gets, and which policy entry decided.
    Policy {
        /// The operation name, as a Claim's scope gives it.
        #[arg(long)]
        operation: String,
        #[command(flatten)]
        connection: OpsConnectionArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
}

/// How `idemd ops` reaches a running server.
#[derive(Clone, Args)]
pub struct OpsConnectionArgs {
    /// The server: `host:port` (plaintext) or `http(s)://host:port`.
    #[arg(long, env = "IDEMD_ADDR", default_value = "http://127.0.0.1:50051")]
    pub addr: String,
    /// A bearer token with the scopes the command needs (lookup, show:
    /// operations; list, unresolved, reconcile: reconcile). Required; an
    /// Option so that a missing and an empty one get the same clear refusal.
    #[arg(long, env = "IDEMD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// PEM CA bundle that verifies an `https://` server.
    #[arg(long, env = "IDEMD_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// PEM client certificate, for mutual TLS (with --client-key).
    #[arg(long, env = "IDEMD_CLIENT_CERT", requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, env = "IDEMD_CLIENT_KEY", requires = "client_cert")]
    pub client_key: Option<PathBuf>,
    /// Each call's deadline (`10s`, `500ms`).
    #[arg(long, env = "IDEMD_TIMEOUT", value_parser = humantime::parse_duration, default_value = "10s")]
    pub timeout: Duration,
}

/// Never prints the token: `Cli` is Debug, and a token in a log is a leak.
impl std::fmt::Debug for OpsConnectionArgs {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("OpsConnectionArgs")
            .field("addr", &self.addr)
            .field("token", &"<redacted>")
            .field("ca_cert", &self.ca_cert)
            .field("client_cert", &self.client_cert)
            .field("client_key", &self.client_key)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The order of `idemd ops list`, by creation time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OpsOrder {
    Oldest,
    Newest,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Check FILE against the server's bounds (the same bound flags as
    /// `serve`) and print the effective defaults and ceilings for each
    /// --operation; exits 1 with every problem if the file is invalid.
    Check {
        file: std::path::PathBuf,
        /// An operation name to show the effective policy for (repeatable).
        #[arg(long)]
        operation: Vec<String>,
        #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
        #[command(flatten)]
        bounds: BoundsArgs,
    },
}

/// What a caller observed and may do, for `idemd ops diagnose`.
#[derive(Debug, Clone, Args)]
pub struct DiagnoseEvidenceArgs {
    /// What the caller saw.
    #[arg(long, value_enum)]
    pub symptom: Option<DiagnoseSymptom>,
    /// With --symptom error-status: the gRPC status code (a number).
    #[arg(long)]
    pub status_code: Option<u32>,
    /// With --symptom error-status: the ErrorInfo reason it carried.
    #[arg(long)]
    pub error_reason: Option<String>,
    /// The JSON request the caller would send now (compared, never stored).
    #[arg(long, conflicts_with = "fingerprint")]
    pub json_payload: Option<String>,
    /// The 64-hex-digit fingerprint the caller would send now.
    #[arg(long)]
    pub fingerprint: Option<String>,
    /// The caller made a new idempotency key for its retry.
    #[arg(long)]
    pub new_key_for_retry: bool,
    /// What a provider lookup found (with --provider-looked-ago).
    #[arg(long, value_enum, requires = "provider_looked_ago")]
    pub provider: Option<DiagnoseProvider>,
    /// How long ago that lookup was sent, e.g. 30s.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub provider_looked_ago: Option<std::time::Duration>,
    /// How long ago the symptom was seen (default: just now).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub observed_ago: Option<std::time::Duration>,
    /// Free text: what else was seen (never stored or logged).
    #[arg(long)]
    pub notes: Option<String>,
    /// How far the caller may go (default: as far as the token's scopes).
    #[arg(long, value_enum)]
    pub authority: Option<DiagnoseAuthority>,
    /// Only moves that change nothing or can be undone.
    #[arg(long)]
    pub reversible_only: bool,
    /// The most new attempts the caller may start.
    #[arg(long)]
    pub attempt_budget: Option<u32>,
    /// The longest the caller may wait, e.g. 5m.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub wait_budget: Option<std::time::Duration>,
    /// What must be true at the end, echoed in the handoff record.
    #[arg(long)]
    pub success_criterion: Option<String>,
    /// Who asks and why, echoed in the handoff record.
    #[arg(long)]
    pub context: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiagnoseSymptom {
    Timeout,
    ErrorStatus,
    ConcurrentDuplicates,
    Stuck,
    DuplicateEffect,
    FrequentConflicts,
    StoreGrowing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiagnoseProvider {
    Found,
    NotFound,
    FoundMoreThanOnce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiagnoseAuthority {
    ReadOnly,
    Retry,
    Reconcile,
}

/// How a listing is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned columns, for people.
    Table,
    /// One JSON array, for scripts.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant and its first token (named `initial`); prints the
    /// token, alone, on stdout. It is shown this once.
    Create {
        name: String,
        /// The first token's scopes: operations, reconcile, admin.
        #[arg(long, default_value = "operations,reconcile")]
        scopes: String,
        /// The first token expires this long after creation (`90d`, `12h`).
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<Duration>,
        /// Why, for the audit trail.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Revoke a tenant and all its tokens. Its id is never reused.
    Revoke {
        name: String,
        /// Why, for the audit trail.
        #[arg(long)]
        reason: Option<String>,
    },
    /// List tenants: name, id, created, state, active credentials.
    List {
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Manage a tenant's bearer tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Converge tenants and their tokens to a file (YAML or JSON): creates
    /// what is missing, revokes what the file revokes; idempotent.
    Apply {
        /// The file declaring tenants and their tokens' SHA-256 (or files
        /// holding the tokens).
        #[arg(short = 'f', long)]
        file: PathBuf,
        /// Also revoke the active tokens of declared tenants that the file
        /// does not list.
        #[arg(long)]
        prune: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create another token for a tenant; prints it, alone, on stdout. It
    /// is shown this once.
    Create {
        tenant: String,
        /// Unique among the tenant's active tokens.
        #[arg(long)]
        name: String,
        /// Comma-separated: operations, reconcile, admin.
        #[arg(long, default_value = "operations,reconcile")]
        scopes: String,
        /// The token expires this long after creation (`90d`, `12h`).
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<Duration>,
        /// Why, for the audit trail.
        #[arg(long)]
        reason: Option<String>,
    },
    /// List a tenant's active tokens: name, scopes, created, expires, last
    /// used. Never the secret, nor its hash.
    List {
        tenant: String,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Revoke one token of a tenant, by name; the tenant and its other
    /// tokens are untouched.
    Revoke {
        tenant: String,
        name: String,
        /// Why, for the audit trail.
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The latest entries, oldest first.
    List {
        /// Only this tenant's entries.
        #[arg(long)]
        tenant: Option<String>,
        /// How many entries, at most.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// The store: `postgres://user@host:5432/idemd` for Postgres, or
    /// `sqlite://PATH` for an embedded SQLite file. Unset: the embedded store
    /// at `<data dir>/idemd.db`.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub database_url: Option<String>,

    /// Directory of the embedded store (`idemd.db`, unless DATABASE_URL names
    /// another file) and of the `--dev` tenant's token; created when missing.
    #[arg(
        long,
        env = "IDEMD_DATA_DIR",
        default_value = "idemd-data",
        global = true
    )]
    pub data_dir: PathBuf,

    /// Connections in the pool.
    #[arg(
        long,
        env = "IDEMD_DB_MAX_CONNECTIONS",
        default_value_t = 16,
        global = true
    )]
    pub db_max_connections: u32,

    /// Postgres: announce state changes with NOTIFY and LISTEN for other
    /// replicas' (waiting Claims wake at once). Turn off on Postgres-compatible
    /// engines without LISTEN/NOTIFY; waiting Claims then only poll.
    #[arg(long, env = "IDEMD_PG_NOTIFY", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub pg_notify: bool,

    /// How long a call waits for a free connection before answering UNAVAILABLE.
    #[arg(long, env = "IDEMD_DB_ACQUIRE_TIMEOUT", default_value = "2s", value_parser = humantime::parse_duration, global = true)]
    pub db_acquire_timeout: Duration,

    /// History entries kept per operation (10-10000). Past the cap, entries
    /// are counted into one final HISTORY_TRUNCATED entry; CLAIMED and the
    /// terminal transitions are always kept.
    #[arg(
        long,
        env = "IDEMD_MAX_HISTORY_ENTRIES",
        default_value_t = 100,
        value_parser = clap::value_parser!(u32).range(10..=10_000),
        global = true
    )]
    pub max_history_entries: u32,

    /// Postgres `lock_timeout` of every session: how long a statement waits
    /// for a row lock (another transaction holding the operation) before the
    /// call answers UNAVAILABLE. `0` waits for ever.
    #[arg(long, env = "IDEMD_DB_LOCK_TIMEOUT", default_value = "2s", value_parser = humantime::parse_duration, global = true)]
    pub db_lock_timeout: Duration,

    /// Postgres `statement_timeout` of every session: the longest one
    /// statement may run before the call answers UNAVAILABLE. `0` for none.
    /// Migrations run without it.
    #[arg(long, env = "IDEMD_DB_STATEMENT_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration, global = true)]
    pub db_statement_timeout: Duration,

    /// Postgres `idle_in_transaction_session_timeout` of every session: a
    /// session idle this long inside a transaction (a stalled replica holding
    /// row locks) is ended by the server, releasing its locks. `0` for none.
    #[arg(long, env = "IDEMD_DB_IDLE_IN_TRANSACTION_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration, global = true)]
    pub db_idle_in_transaction_timeout: Duration,

    /// The longest one store call may take, connection wait and every
    /// statement included, before it answers UNAVAILABLE; also bounds a
    /// database that stopped answering without closing the connection.
    #[arg(long, env = "IDEMD_DB_CALL_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration, global = true)]
    pub db_call_timeout: Duration,

    /// Postgres: TCP keepalive on every database connection, at both ends
    /// (idemd's sockets and the server's `tcp_keepalives_*`): after this
    /// long without traffic, a probe every 5s, and after 3 unanswered the
    /// connection is dropped, so a database gone without a word is noticed
    /// on idle connections too. Whole seconds. `0` turns keepalive and the
    /// TCP user timeout off (the system defaults).
    #[arg(long, env = "IDEMD_DB_TCP_KEEPALIVE", default_value = "10s", value_parser = humantime::parse_duration, global = true)]
    pub db_tcp_keepalive: Duration,

    /// Postgres: `TCP_USER_TIMEOUT` of every database connection, at both
    /// ends (and the server's `tcp_user_timeout`): data sent and not
    /// acknowledged for this long ends the connection; with keepalive, also
    /// when an idle connection's probes go unanswered this long. `0`: the
    /// system default.
    #[arg(long, env = "IDEMD_DB_TCP_USER_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration, global = true)]
    pub db_tcp_user_timeout: Duration,

    /// Postgres: this database has no standby to fail over to, so commits
    /// that wait for no standby lose nothing on failover. Silences the
    /// start-up warning about `synchronous_commit` and
    /// `synchronous_standby_names` (not the one about `synchronous_commit =
    /// off`, which loses results in a crash of the one node too).
    #[arg(
        long = "acknowledge-single-node",
        env = "IDEMD_SINGLE_NODE_DURABILITY_OK",
        default_value_t = false,
        global = true
    )]
    pub single_node_durability_ok: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// gRPC listen address.
    #[arg(long, env = "IDEMD_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,

    /// Local development: on first start create a tenant named `dev`, keep its
    /// token in `<data dir>/dev-token` (reused on every later start) and print
    /// it. Listens on loopback addresses only.
    #[arg(long, env = "IDEMD_DEV", default_value_t = false)]
    pub dev: bool,

    /// Apply migrations at start-up (creating the database if it is missing).
    /// Turn off when a separate job migrates.
    #[arg(long, env = "IDEMD_MIGRATE_ON_START", default_value_t = true, action = clap::ArgAction::Set)]
    pub migrate_on_start: bool,

    /// On SIGTERM, how long in-flight calls, and the background work under way
    /// (a sweep batch, a gauge count), may take to finish.
    #[arg(long, env = "IDEMD_DRAIN_TIMEOUT", default_value = "25s", value_parser = humantime::parse_duration)]
    pub drain_timeout: Duration,

    /// How long a verified token is trusted before the store is asked again;
    /// a revocation takes effect within it.
    #[arg(long, env = "IDEMD_AUTH_CACHE_TTL", default_value = "5s", value_parser = humantime::parse_duration)]
    pub auth_cache_ttl: Duration,

    /// How long a well-formed token the store does not know is refused
    /// without asking the store again (tokens of the wrong shape never
    /// reach it).
    #[arg(long, env = "IDEMD_AUTH_NEGATIVE_CACHE_TTL", default_value = "5s", value_parser = humantime::parse_duration)]
    pub auth_negative_cache_ttl: Duration,

    /// Tokens the authentication cache remembers, known and unknown together.
    #[arg(long, env = "IDEMD_AUTH_CACHE_ENTRIES", default_value_t = 10000)]
    pub auth_cache_entries: usize,

    /// Token lookups in the store at once; calls with uncached tokens wait
    /// for a turn, so a flood of unknown tokens cannot take the pool.
    #[arg(long, env = "IDEMD_AUTH_LOOKUP_CONCURRENCY", default_value_t = 4)]
    pub auth_lookup_concurrency: usize,

    /// Calls that may wait for a token lookup (beyond those looking up);
    /// past it, and past --auth-lookup-queue-timeout, calls with uncached
    /// tokens are answered UNAVAILABLE with RetryInfo instead of queuing
    /// into a slow database.
    #[arg(long, env = "IDEMD_AUTH_LOOKUP_QUEUE", default_value_t = 16)]
    pub auth_lookup_queue: usize,

    /// Longest a call with an uncached token waits for its lookup's turn.
    #[arg(long, env = "IDEMD_AUTH_LOOKUP_QUEUE_TIMEOUT", default_value = "250ms", value_parser = humantime::parse_duration)]
    pub auth_lookup_queue_timeout: Duration,

    /// Bytes of memory for terminal results kept to answer replays without
    /// a database round trip (an entry counts what it keeps resident: its
    /// result and about 1 KiB beside it); 0 turns the
    /// cache off. Each replica keeps its own: terminal records never change.
    #[arg(long, env = "IDEMD_RESULT_CACHE_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub result_cache_bytes: u64,

    /// How often this replica adds its in-memory counts of replays and
    /// Pending answers to their operations (one batched statement). The
    /// counts Lookup shows lag by up to this; a crash loses at most this
    /// long's counts. A drain flushes them.
    #[arg(long, env = "IDEMD_ANSWER_COUNT_INTERVAL", default_value = "5s", value_parser = parse_interval)]
    pub answer_count_interval: Duration,

    /// Operations whose replays and Pending answers this replica counts
    /// between two flushes; answers for more are not counted (counted in
    /// idemd_answer_counts_dropped_total instead).
    /// (The default is `service::tallies::DEFAULT_CAPACITY`, written out for
    /// the chart's documentation check; a test holds the two equal.)
    #[arg(long, env = "IDEMD_ANSWER_COUNT_CAPACITY", default_value_t = 10000)]
    pub answer_count_capacity: usize,

    /// How close together new operations with the same request (one tenant,
    /// one operation name, one fingerprint) count as one intent retried
    /// under new keys; 0 turns the watch off. In memory, per replica.
    /// (The default is `service::new_keys::DEFAULT_WINDOW`; a test holds
    /// the two equal.)
    #[arg(long, env = "IDEMD_NEW_KEY_RETRY_WINDOW", default_value = "60s", value_parser = humantime::parse_duration)]
    pub new_key_retry_window: Duration,

    /// How many keys for the same request within the window make the
    /// caller suspected of a new key per retry (counted in
    /// idemd_suspected_new_key_retries_total, logged, and shown by Lookup).
    /// (The default is `service::new_keys::DEFAULT_THRESHOLD`.)
    #[arg(long, env = "IDEMD_NEW_KEY_RETRY_THRESHOLD", default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..))]
    pub new_key_retry_threshold: u32,

    /// How often the store is checked for the readiness probe.
    #[arg(long, env = "IDEMD_READINESS_INTERVAL", default_value = "5s", value_parser = parse_interval)]
    pub readiness_interval: Duration,

    /// PEM certificate chain: serve the API over TLS (with --tls-key).
    #[arg(long, env = "IDEMD_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "IDEMD_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,

    /// Serve the API in plaintext (no --tls-cert): only behind a mesh or a
    /// proxy that terminates TLS on the same host. Without it, and without
    /// --tls-cert, `serve` refuses to start; `--dev` needs neither (it listens
    /// on loopback only). No effect when --tls-cert is given.
    #[arg(long, env = "IDEMD_INSECURE_PLAINTEXT", default_value_t = false)]
    pub insecure_plaintext: bool,

    /// PEM bundle of the CAs whose client certificates are accepted (mutual
    /// TLS); a caller's tenant and scopes then come from its certificate
    /// through --tls-identities. Bearer tokens keep working beside it.
    #[arg(long, env = "IDEMD_TLS_CLIENT_CA", requires_all = ["tls_cert", "tls_identities"])]
    pub tls_client_ca: Option<std::path::PathBuf>,

    /// YAML file mapping client certificate identities (SAN URIs such as
    /// SPIFFE IDs, exact or ending in `/*`, or DNS names) to a tenant and
    /// scopes (docs/operating.md, "TLS").
    #[arg(long, env = "IDEMD_TLS_IDENTITIES", requires = "tls_client_ca")]
    pub tls_identities: Option<std::path::PathBuf>,

    /// Every API call must come with a client certificate of --tls-client-ca
    /// (a bearer token alone is refused, CERTIFICATE_REQUIRED).
    #[arg(
        long,
        env = "IDEMD_TLS_REQUIRE_CLIENT_CERT",
        default_value_t = false,
        requires = "tls_client_ca"
    )]
    pub tls_require_client_cert: bool,

    /// How often the TLS files (certificate, key, client CA bundle,
    /// identities) are read again; a change applies to new connections.
    #[arg(long, env = "IDEMD_TLS_RELOAD_INTERVAL", default_value = "5s", value_parser = parse_interval)]
    pub tls_reload_interval: Duration,

    /// YAML file of operation policies: defaults and ceilings of the Claim
    /// fields by operation name (docs/operating.md, "Operation policies").
    /// An invalid file stops start-up; `idemd policy check FILE` checks one.
    #[arg(long, env = "IDEMD_POLICY_FILE")]
    pub policy_file: Option<std::path::PathBuf>,

    /// How often --policy-file is read again; a valid change applies to the
    /// Claims admitted after it, an invalid one is logged and counted
    /// (idemd_policy_reload_failures_total) and the policies in force stay.
    #[arg(long, env = "IDEMD_POLICY_RELOAD_INTERVAL", default_value = "5s", value_parser = parse_interval)]
    pub policy_reload_interval: Duration,

    /// A second, plaintext listener that serves only grpc.health.v1.Health,
    /// for probes that speak neither TLS nor credentials (Kubernetes' gRPC probes).
    #[arg(long, env = "IDEMD_HEALTH_LISTEN")]
    pub health_listen: Option<SocketAddr>,

    /// The web console's address (support staff: find, read and reconcile
    /// operations in a browser). Off unless given. Plain HTTP on loopback
    /// addresses only (reach it through `kubectl port-forward` or an SSH
    /// tunnel) unless --console-tls-cert and --console-tls-key are given:
    /// then HTTPS, on any address.
    #[arg(long, env = "IDEMD_CONSOLE_LISTEN")]
    pub console_listen: Option<SocketAddr>,

    /// PEM certificate chain: serve the console over HTTPS (with
    /// --console-tls-key), which lets --console-listen take a non-loopback
    /// address. Its names are the only hosts the console answers; read again
    /// every --tls-reload-interval, as the API's are.
    #[arg(long, env = "IDEMD_CONSOLE_TLS_CERT", requires = "console_tls_key")]
    pub console_tls_cert: Option<std::path::PathBuf>,

    /// PEM private key of --console-tls-cert.
    #[arg(long, env = "IDEMD_CONSOLE_TLS_KEY", requires = "console_tls_cert")]
    pub console_tls_key: Option<std::path::PathBuf>,

    /// Prometheus metrics address (served at /metrics); `off` disables it.
    #[arg(long, env = "IDEMD_METRICS_LISTEN", default_value = "127.0.0.1:9464", value_parser = parse_optional_address)]
    pub metrics_listen: OptionalAddress,

    /// Operation names that get their own `operation` label value in metrics
    /// (comma-separated); all others count as `other`. Keys never are labels.
    #[arg(long, env = "IDEMD_METRICS_OPERATIONS", value_delimiter = ',')]
    pub metrics_operations: Vec<String>,

    /// Label metrics by tenant id too; only where tenants are few.
    #[arg(long, env = "IDEMD_METRICS_TENANT_LABEL", default_value_t = false, action = clap::ArgAction::Set)]
    pub metrics_tenant_label: bool,

    /// How often the gauges counted in the database are refreshed.
    #[arg(long, env = "IDEMD_GAUGE_INTERVAL", default_value = "15s", value_parser = parse_interval)]
    pub gauge_interval: Duration,

    /// How often the retention sweeper runs on this replica.
    #[arg(long, env = "IDEMD_SWEEP_INTERVAL", default_value = "30s", value_parser = parse_interval)]
    pub sweep_interval: Duration,

    /// Records of each kind one sweep transaction handles.
    #[arg(long, env = "IDEMD_SWEEP_BATCH", default_value_t = 500)]
    pub sweep_batch: u32,

    /// How long a tombstone (scope, fingerprint, outcome; no result) refuses
    /// new Claims after the result expired, before the scope is free again.
    #[arg(long, env = "IDEMD_TOMBSTONE_RETENTION", default_value = "7days", value_parser = humantime::parse_duration)]
    pub tombstone_retention: Duration,

    /// How long the audit trail (tenant and credential changes) is kept;
    /// older entries are deleted by the sweeper, once an hour.
    #[arg(long, env = "IDEMD_AUDIT_RETENTION", default_value = "400days", value_parser = humantime::parse_duration)]
    pub audit_retention: Duration,

    #[command(flatten)]
    pub bounds: BoundsArgs,

    #[command(flatten)]
    pub transport: TransportArgs,
}

/// What connections and calls may hold: streams, keepalive, time, calls
/// in flight, waiting Claims.
#[derive(Debug, Clone, Args)]
pub struct TransportArgs {
    /// HTTP/2 streams (concurrent calls) one connection may have open; a
    /// client opens more on further connections, or waits.
    #[arg(long, env = "IDEMD_MAX_CONCURRENT_STREAMS", default_value_t = 100)]
    pub max_concurrent_streams: u32,
    /// How often an HTTP/2 PING checks that a quiet peer is still there.
    #[arg(long, env = "IDEMD_HTTP2_KEEPALIVE_INTERVAL", default_value = "30s", value_parser = humantime::parse_duration)]
    pub http2_keepalive_interval: Duration,
    /// How long a PING may go unanswered before the connection is closed.
    #[arg(long, env = "IDEMD_HTTP2_KEEPALIVE_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub http2_keepalive_timeout: Duration,
    /// Longest a call may take, reading its request included (a stalled
    /// body is cut off: DEADLINE_EXCEEDED, REQUEST_TIMEOUT). At least
    /// --max-wait plus 1s, so a waiting Claim still has time to answer.
    #[arg(long, env = "IDEMD_REQUEST_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,
    /// Calls in flight on this server; more are shed at once with
    /// UNAVAILABLE (OVERLOADED, RetryInfo) rather than queued.
    #[arg(long, env = "IDEMD_MAX_IN_FLIGHT", default_value_t = 1024)]
    pub max_in_flight: usize,
    /// Calls in flight for one tenant on this server; more are refused with
    /// RESOURCE_EXHAUSTED (TENANT_CONCURRENCY_LIMIT, RetryInfo).
    #[arg(long, env = "IDEMD_MAX_IN_FLIGHT_PER_TENANT", default_value_t = 256)]
    pub max_in_flight_per_tenant: usize,
    /// Bytes of request messages in flight on this server, as their gRPC
    /// length prefixes declare them (each call holds its message's bytes
    /// until it ends); past it, calls are shed with UNAVAILABLE (OVERLOADED,
    /// RetryInfo). A call costs about four times its message in memory:
    /// size the pod's memory limit from it (docs/operating.md).
    #[arg(long, env = "IDEMD_MAX_REQUEST_BYTES_IN_FLIGHT", default_value_t = DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT)]
    pub max_request_bytes_in_flight: usize,
    /// Claims waiting for a pending operation at once on this server; past
    /// it, a Claim answers Pending at once (with retry_after) instead.
    #[arg(long, env = "IDEMD_MAX_WAITERS", default_value_t = 512)]
    pub max_waiters: usize,
    /// Claims of one tenant waiting at once on this server (keep it below
    /// --max-in-flight-per-tenant); past it, Pending at once.
    #[arg(long, env = "IDEMD_MAX_WAITERS_PER_TENANT", default_value_t = 128)]
    pub max_waiters_per_tenant: usize,
    /// Connections open at once on the API port; one more is accepted and
    /// closed at once.
    #[arg(long, env = "IDEMD_MAX_CONNECTIONS", default_value_t = 10000)]
    pub max_connections: usize,
    /// Connections open at once from one source address (IPv4 address, or
    /// IPv6 address); one more is accepted and closed at once, so one peer
    /// cannot hold every slot. Behind a proxy every client shares its
    /// address: raise it there (0 turns the cap off).
    #[arg(long, env = "IDEMD_MAX_CONNECTIONS_PER_SOURCE", default_value_t = 1024)]
    pub max_connections_per_source: usize,
    /// Age at which a connection is asked to go (HTTP/2 GOAWAY; clients
    /// reconnect), however busy: a peer that answers PINGs is never idle.
    #[arg(long, env = "IDEMD_MAX_CONNECTION_AGE", default_value = "30m", value_parser = humantime::parse_duration)]
    pub max_connection_age: Duration,
    /// How long calls under way on a connection past its age may finish
    /// before it is closed; more than --request-timeout, so none is cut off.
    #[arg(long, env = "IDEMD_MAX_CONNECTION_AGE_GRACE", default_value = "70s", value_parser = humantime::parse_duration)]
    pub max_connection_age_grace: Duration,
    /// How long a new connection has for its TLS handshake, and then for its
    /// first bytes (the HTTP/2 preface), before it is closed.
    #[arg(long, env = "IDEMD_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub handshake_timeout: Duration,
    /// A connection from which nothing is read for this long is closed;
    /// more than --http2-keepalive-interval plus --http2-keepalive-timeout,
    /// whose PINGs every live peer answers.
    #[arg(long, env = "IDEMD_CONNECTION_IDLE_TIMEOUT", default_value = "2m", value_parser = humantime::parse_duration)]
    pub connection_idle_timeout: Duration,
}

/// An address, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalAddress(pub Option<SocketAddr>);

/// How often a background task runs. Zero is refused here: tokio's
/// interval panics on it, which would kill the task while the server went
/// on answering, its sweeping, gauges or readiness stopped.
fn parse_interval(value: &str) -> Result<Duration, String> {
    let interval = humantime::parse_duration(value).map_err(|error| error.to_string())?;
    if interval.is_zero() {
        return Err("must be longer than zero (how often a background task runs)".into());
    }
    Ok(interval)
}

fn parse_optional_address(value: &str) -> Result<OptionalAddress, String> {
    match value.trim() {
        "" | "off" | "none" => Ok(OptionalAddress(None)),
        address => address
            .parse()
            .map(|address| OptionalAddress(Some(address)))
            .map_err(|error| format!("{address:?} is not an address: {error}")),
    }
}

/// The bounds of DESIGN.md. Tests lower the minimum lease to milliseconds.
#[derive(Debug, Clone, Args)]
pub struct BoundsArgs {
    /// Shortest lease a Claim or Renew may ask for; also the shortest attempt
    /// duration and operation deadline. A duration: `500ms`, `1s`, `5m`.
    #[arg(long, env = "IDEMD_MIN_LEASE", default_value = "1s", value_parser = humantime::parse_duration)]
    pub min_lease: Duration,
    /// Longest lease a Claim or Renew may ask for (a duration).
    #[arg(long, env = "IDEMD_MAX_LEASE", default_value = "1h", value_parser = humantime::parse_duration)]
    pub max_lease: Duration,
    /// Lease of a Claim that asks for none; between --min-lease and
    /// --max-lease (a duration).
    #[arg(long, env = "IDEMD_DEFAULT_LEASE", default_value = "30s", value_parser = humantime::parse_duration)]
    pub default_lease: Duration,
    /// How long an attempt may run when its Claim does not say (never less
    /// than the Claim's lease); Renew cannot extend a lease past it (a duration).
    #[arg(long, env = "IDEMD_DEFAULT_ATTEMPT_DURATION", default_value = "5m", value_parser = humantime::parse_duration)]
    pub default_attempt_duration: Duration,
    /// Longest attempt duration a Claim may ask for (a duration).
    #[arg(long, env = "IDEMD_MAX_ATTEMPT_DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
    pub max_attempt_duration: Duration,
    /// Attempts an operation gets when its Claim does not say, takeovers
    /// included (a count, 1-100).
    #[arg(long, env = "IDEMD_DEFAULT_MAX_ATTEMPTS", default_value_t = 5)]
    pub default_max_attempts: u32,
    /// How long a stored result is replayed when its Claim does not say,
    /// before it becomes a tombstone (a duration, at most --max-retention).
    #[arg(long, env = "IDEMD_DEFAULT_RETENTION", default_value = "24h", value_parser = humantime::parse_duration)]
    pub default_retention: Duration,
    /// Longest retention a Claim may ask for (a duration).
    #[arg(long, env = "IDEMD_MAX_RETENTION", default_value = "30days", value_parser = humantime::parse_duration)]
    pub max_retention: Duration,
    /// Added to every deadline that decides whether an earlier attempt's
    /// effect may still be in flight: the `previous_attempt_deadline` a
    /// ReconcileFirst tells, and the wait before Reconcile FAILED or
    /// NOT_APPLIED is accepted. Covers a forward step of the database clock
    /// (a VM resumed, an NTP step) of up to this much; the offset of the
    /// database clock from this replica's is the metric
    /// `idemd_db_clock_offset_seconds` (a duration).
    #[arg(long, env = "IDEMD_CLOCK_MARGIN", default_value = "3s", value_parser = humantime::parse_duration)]
    pub clock_margin: Duration,
    /// Longest retry_after a RETRYABLE Fail may ask for (a duration).
    #[arg(long, env = "IDEMD_MAX_RETRY_AFTER", default_value = "1h", value_parser = humantime::parse_duration)]
    pub max_retry_after: Duration,
    /// Largest result body Complete or Reconcile may store, in bytes.
    #[arg(long, env = "IDEMD_MAX_RESULT_BYTES", default_value_t = 1024 * 1024)]
    pub max_result_bytes: usize,
    /// Largest `json_payload` or `bytes_payload` a Claim may carry, in bytes,
    /// checked before the payload is parsed or hashed (canonicalizing JSON
    /// costs many times its size). Larger requests send a fingerprint.
    #[arg(long, env = "IDEMD_MAX_PAYLOAD_BYTES", default_value_t = 64 * 1024)]
    pub max_payload_bytes: usize,
    /// Longest a Claim may wait for a pending operation: a longer `wait` is
    /// cut to it, and to the call's deadline (a duration).
    #[arg(long, env = "IDEMD_MAX_WAIT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub max_wait: Duration,
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_background_tasks_interval_of_zero_is_refused_at_start_up() {
        for flag in [
            "--sweep-interval",
            "--gauge-interval",
            "--readiness-interval",
        ] {
            let refused = Cli::try_parse_from(["idemd", "serve", flag, "0s"])
                .err()
                .unwrap_or_else(|| panic!("{flag} 0s was accepted"));
            assert!(
                refused.to_string().contains("longer than zero"),
                "{refused}"
            );
            assert!(Cli::try_parse_from(["idemd", "serve", flag, "1ms"]).is_ok());
        }
    }

    #[test]
    fn the_answer_count_flags_default_to_what_the_tallies_say() {
        use crate::service::tallies::{DEFAULT_CAPACITY, DEFAULT_INTERVAL};
        let cli = Cli::try_parse_from(["idemd", "serve"]).expect("defaults parse");
        let Command::Serve(serve) = cli.command else {
            panic!("serve parses as serve");
        };
        assert_eq!(serve.answer_count_capacity, DEFAULT_CAPACITY);
        assert_eq!(serve.answer_count_interval, DEFAULT_INTERVAL);
    }

    #[test]
    fn the_new_key_retry_flags_default_to_what_the_detector_says() {
        use crate::service::new_keys::NewKeySettings;
        let cli = Cli::try_parse_from(["idemd", "serve"]).expect("defaults parse");
        let Command::Serve(serve) = cli.command else {
            panic!("serve parses as serve");
        };
        let defaults = NewKeySettings::default();
        assert_eq!(serve.new_key_retry_window, defaults.window);
        assert_eq!(serve.new_key_retry_threshold, defaults.threshold);
        let one = Cli::try_parse_from(["idemd", "serve", "--new-key-retry-threshold", "1"]);
        assert!(one.is_err(), "one key is every operation: refused");
        let off = Cli::try_parse_from(["idemd", "serve", "--new-key-retry-window", "0s"])
            .expect("zero parses: the watch is off");
        let Command::Serve(off) = off.command else {
            panic!("serve parses as serve");
        };
        assert!(off.new_key_retry_window.is_zero());
    }

    #[test]
    fn the_history_cap_flag_says_what_the_domain_says() {
        use crate::domain::HistoryCap;
        let cli = Cli::try_parse_from(["idemd", "serve"]).expect("defaults parse");
        assert_eq!(
            cli.database.max_history_entries,
            HistoryCap::DEFAULT_MAX_ENTRIES
        );
        for (value, accepted) in [
            (HistoryCap::MIN_MAX_ENTRIES - 1, false),
            (HistoryCap::MIN_MAX_ENTRIES, true),
            (HistoryCap::MAX_MAX_ENTRIES, true),
            (HistoryCap::MAX_MAX_ENTRIES + 1, false),
        ] {
            let parsed = Cli::try_parse_from([
                "idemd",
                "serve",
                "--max-history-entries",
                &value.to_string(),
            ]);
            assert_eq!(parsed.is_ok(), accepted, "{value}");
        }
    }

    #[test]
    fn database_keepalive_defaults_are_the_stores_and_zero_turns_it_off() {
        use crate::store::postgres::DatabaseKeepalive;
        let keepalive_of = |cli: &Cli| {
            DatabaseKeepalive::new(
                cli.database.db_tcp_keepalive,
                cli.database.db_tcp_user_timeout,
            )
        };
        let defaults = Cli::try_parse_from(["idemd", "serve"]).expect("defaults parse");
        assert_eq!(keepalive_of(&defaults), Ok(DatabaseKeepalive::default()));
        let off =
            Cli::try_parse_from(["idemd", "serve", "--db-tcp-keepalive", "0"]).expect("parses");
        assert_eq!(keepalive_of(&off), Ok(DatabaseKeepalive::OFF));
    }

    #[test]
    fn serve_defaults_parse_and_metrics_can_be_turned_off() {
        let cli = Cli::try_parse_from(["idemd", "serve"]).expect("defaults parse");
        let Command::Serve(args) = cli.command else {
            panic!("serve expected");
        };
        assert_eq!(
            args.metrics_listen.0,
            Some(SocketAddr::from(([127, 0, 0, 1], 9464)))
        );
        let off =
            Cli::try_parse_from(["idemd", "serve", "--metrics-listen", "off"]).expect("parses");
        let Command::Serve(args) = off.command else {
            panic!("serve expected");
        };
        assert_eq!(args.metrics_listen.0, None);
    }
}

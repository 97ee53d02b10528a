//! Faults inside the campaign's own database (never a shared one: only the
//! cluster `process::Postgres` created is ever touched), through `psql`:
//! - statements that fail: a trigger on idemd's `operations` table (BEFORE
//!   INSERT OR UPDATE, FOR EACH STATEMENT) makes a fraction of the
//!   statements raise one of the transient SQLSTATEs a real database raises
//!   under contention or administration. The fraction is a one-row table
//!   the harness updates at run time (0: off);
//! - backends terminated: `pg_terminate_backend` of random idemd sessions
//!   (application_name `idemd`), wherever they are (idle in the pool, inside
//!   a transaction, waiting on a lock).
//!
//! The trigger's failures roll back with their transactions, so they are
//! counted from the Postgres log (every injected error is logged at ERROR
//! with a message of ours), which survives restarts and crashes.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::process::Postgres;

/// The transient SQLSTATEs the trigger raises: serialization_failure,
/// deadlock_detected, query_canceled, lock_not_available.
pub(crate) const TRANSIENT_SQLSTATES: [&str; 4] = ["40001", "40P01", "57014", "55P03"];

/// What the log line of an injected failure starts with.
const INJECTED: &str = "idemd-faults: injected SQLSTATE ";

/// Installs the switch and the trigger; idemd's schema must exist (run after
/// `idemd migrate`). The failures start off.
pub(crate) fn install(postgres: &Postgres) -> Result<(), String> {
    let states = TRANSIENT_SQLSTATES
        .iter()
        .map(|state| format!("'{state}'"))
        .collect::<Vec<_>>()
        .join(", ");
    postgres
        .psql(&format!(
            r#"
CREATE SCHEMA idemd_faults;
CREATE TABLE idemd_faults.switch (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    failure_rate double precision NOT NULL CHECK (failure_rate BETWEEN 0 AND 1)
);
INSERT INTO idemd_faults.switch (failure_rate) VALUES (0);
CREATE FUNCTION idemd_faults.fail_some_statements() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    states CONSTANT text[] := ARRAY[{states}];
    chosen text;
BEGIN
    IF random() < (SELECT failure_rate FROM idemd_faults.switch) THEN
        chosen := states[1 + floor(random() * array_length(states, 1))::int];
        RAISE EXCEPTION '{INJECTED}% (% on %)', chosen, TG_OP, TG_TABLE_NAME
            USING ERRCODE = chosen;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER idemd_faults_fail_some_statements
    BEFORE INSERT OR UPDATE ON public.operations
    FOR EACH STATEMENT EXECUTE FUNCTION idemd_faults.fail_some_statements();
"#
        ))
        .map(drop)
}

/// Sets the fraction of statements on `operations` that fail (0: none), and
/// reads it back. Tried again for a few seconds: the database may just be
/// coming back from a restart.
pub(crate) fn set_failure_rate(postgres: &Postgres, rate: f64) -> Result<(), String> {
    let mut last_error = String::new();
    for _ in 0..25 {
        match postgres.psql(&format!(
            "UPDATE idemd_faults.switch SET failure_rate = {rate}; \
             SELECT failure_rate FROM idemd_faults.switch;"
        )) {
            Ok(output) if output.trim().parse::<f64>() == Ok(rate) => return Ok(()),
            Ok(output) => last_error = format!("the switch reads {output:?}, not {rate}"),
            Err(error) => last_error = error,
        }
        #[allow(
            clippy::disallowed_methods,
            reason = "the campaign calls this on a blocking thread (spawn_blocking)"
        )]
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("the failure switch could not be set: {last_error}"))
}

/// Terminates up to `count` random idemd backends; how many ended.
pub(crate) fn terminate_backends(postgres: &Postgres, count: u64) -> Result<u64, String> {
    let output = postgres.psql(&format!(
        "SELECT count(*) FROM (\
             SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity \
             WHERE application_name = 'idemd' AND datname = current_database() \
               AND pid <> pg_backend_pid() \
             ORDER BY random() LIMIT {count}\
         ) AS terminated WHERE ended;"
    ))?;
    output
        .trim()
        .parse()
        .map_err(|_| format!("pg_terminate_backend answered {output:?}"))
}

/// The failures the trigger injected so far, per SQLSTATE (every state
/// listed, zero included).
pub(crate) fn injected_failures(
    postgres: &Postgres,
) -> Result<BTreeMap<&'static str, u64>, String> {
    let log = std::fs::read_to_string(postgres.log())
        .map_err(|error| format!("{}: {error}", postgres.log().display()))?;
    Ok(count_injected(&log))
}

fn count_injected(log: &str) -> BTreeMap<&'static str, u64> {
    let mut counts: BTreeMap<&'static str, u64> = TRANSIENT_SQLSTATES
        .iter()
        .map(|state| (*state, 0))
        .collect();
    for line in log.lines().filter(|line| line.contains("ERROR:")) {
        let Some((_, after)) = line.split_once(INJECTED) else {
            continue;
        };
        if let Some(state) = TRANSIENT_SQLSTATES
            .iter()
            .find(|state| after.starts_with(**state))
            && let Some(count) = counts.get_mut(state)
        {
            *count += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// On a cluster of the test's own, with a stand-in `operations` table:
    /// the switch turns the failures on and off, each failure carries one of
    /// the transient SQLSTATEs and is counted from the log, and an idemd
    /// session is terminated while the harness's own is not.
    #[test]
    fn the_trigger_fails_statements_while_switched_on_and_backends_are_terminated() {
        let directory =
            std::env::temp_dir().join(format!("idemd-faults-database-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        let postgres = Postgres::create(&directory).expect("initdb");
        postgres
            .psql("CREATE TABLE operations (id integer PRIMARY KEY, state text);")
            .expect("table");
        install(&postgres).expect("install");

        postgres
            .psql("INSERT INTO operations VALUES (1, 'a');")
            .expect("off: the insert works");
        set_failure_rate(&postgres, 1.0).expect("on");
        let error = postgres
            .psql("UPDATE operations SET state = 'b';")
            .expect_err("on: every statement fails");
        assert!(error.contains(INJECTED), "{error}");
        set_failure_rate(&postgres, 0.0).expect("off");
        postgres
            .psql("UPDATE operations SET state = 'd';")
            .expect("off again: the update works");
        assert_eq!(
            postgres
                .psql("SELECT state FROM operations;")
                .expect("select")
                .trim(),
            "d"
        );
        // The one failure, under one of the four states.
        let counts = injected_failures(&postgres).expect("log");
        assert_eq!(counts.values().sum::<u64>(), 1, "{counts:?}");

        let mut session = Command::new("psql")
            .args(["-X", "-q", "-h", "127.0.0.1", "-p"])
            .arg(postgres.port.to_string())
            .args([
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-c",
                "SELECT pg_sleep(30);",
            ])
            .env("PGAPPNAME", "idemd")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("an idemd-named session");
        let mut terminated = 0;
        for _ in 0..50 {
            terminated = terminate_backends(&postgres, 5).expect("terminate");
            if terminated > 0 {
                break;
            }
            #[allow(clippy::disallowed_methods, reason = "a plain test thread")]
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(terminated, 1, "only the idemd session");
        let status = session.wait().expect("wait");
        assert!(!status.success(), "its statement was cut: {status}");
        drop(postgres);
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn injected_failures_are_counted_per_sqlstate_from_error_lines_only() {
        let log = "\
2026-12-01 15:00:00 UTC [10] ERROR:  idemd-faults: injected SQLSTATE 40001 (UPDATE on operations)
2026-12-01 15:00:00 UTC [10] CONTEXT:  PL/pgSQL function idemd_faults.fail_some_statements() line 7 at RAISE
2026-12-01 15:00:00 UTC [11] ERROR:  idemd-faults: injected SQLSTATE 55P03 (INSERT on operations)
2026-12-01 15:00:01 UTC [12] ERROR:  idemd-faults: injected SQLSTATE 40001 (INSERT on operations)
2026-12-01 15:00:01 UTC [12] STATEMENT:  UPDATE operations SET state = $1
2026-12-01 15:00:02 UTC [13] ERROR:  duplicate key value violates unique constraint
";
        let counts = count_injected(log);
        assert_eq!(counts.get("40001"), Some(&2));
        assert_eq!(counts.get("55P03"), Some(&1));
        assert_eq!(counts.get("40P01"), Some(&0));
        assert_eq!(counts.get("57014"), Some(&0));
        assert_eq!(counts.values().sum::<u64>(), 3);
    }
}

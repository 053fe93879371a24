//! Tests of the `rover-bench` binary: it describes itself, and an interrupted run cleans up after
//! itself. (The benchmarks themselves run with `make bench`, never in `make test`.)

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

mod docs;

use std::process::Command;

#[test]
fn help_names_every_section() {
    let output = Command::new(env!("CARGO_BIN_EXE_rover-bench"))
        .arg("--help")
        .output()
        .expect("rover-bench runs");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for section in [
        "floor",
        "tool-hop",
        "agent-build",
        "turns",
        "streams",
        "soak",
    ] {
        assert!(
            help.contains(section),
            "--help does not name {section}:\n{help}"
        );
    }
}

/// Ctrl-C (or SIGTERM) mid-run removes what the run made — its vhost, its database and that
/// database's roles — and says so, exiting 130 with nothing written; before, the process died
/// with them left behind.
#[tokio::test]
async fn an_interrupted_run_removes_its_vhost_database_and_roles() {
    use std::io::{BufRead as _, BufReader};
    use std::process::Stdio;

    let out = tempfile::tempdir().expect("a temporary directory");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rover-bench"))
        .args([
            "--only",
            "floor",
            "--warmup",
            "0",
            "--duration",
            "600",
            "--out",
        ])
        .arg(out.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rover-bench starts");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr is piped")).lines();
    let mut names = None;
    let mut said = Vec::new();
    // Read until the run is measuring: its world exists, a case is under way.
    for line in stderr.by_ref() {
        let line = line.expect("stderr is text");
        said.push(line.clone());
        if let Some(rest) = line.strip_prefix("rover-bench: this run's vhost ") {
            let (vhost, database) = rest.split_once(", database ").expect("both names");
            names = Some((vhost.to_owned(), database.to_owned()));
        }
        if line.contains("at c=1") {
            break;
        }
    }
    let (vhost, database) = names.unwrap_or_else(|| panic!("the run names its world: {said:?}"));
    assert!(
        rover_testkit::rabbitmqctl(&["list_vhosts", "name"]).contains(&vhost),
        "the run's vhost exists while it runs"
    );
    let admin = std::env::var("ROVER_TEST_ADMIN_URL")
        .unwrap_or_else(|_| rover_domain::testing::DEFAULT_ADMIN_URL.to_owned());
    let left = || async {
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
            .await
            .expect("Postgres as its superuser");
        let databases: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE datname = $1")
                .bind(&database)
                .fetch_one(&mut conn)
                .await
                .expect("count databases");
        let roles: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_roles WHERE rolname LIKE $1")
            .bind(format!("{database}%"))
            .fetch_one(&mut conn)
            .await
            .expect("count roles");
        (databases, roles)
    };
    let (databases, roles) = left().await;
    assert_eq!(databases, 1, "the run's database exists while it runs");
    assert!(roles >= 2, "the run's roles exist while it runs");

    let pid = child.id().to_string();
    let signalled = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill runs");
    assert!(signalled.success());
    let rest: Vec<String> = stderr.map(|line| line.expect("stderr is text")).collect();
    let status = child.wait().expect("rover-bench exits");

    assert_eq!(
        status.code(),
        Some(130),
        "stderr after the signal: {rest:?}"
    );
    assert!(
        rest.iter().any(|line| line.contains("interrupted")),
        "it says it was interrupted: {rest:?}"
    );
    assert!(
        !rover_testkit::rabbitmqctl(&["list_vhosts", "name"]).contains(&vhost),
        "the run's vhost is gone"
    );
    assert_eq!(
        left().await,
        (0, 0),
        "the run's database and roles are gone"
    );
    assert!(
        std::fs::read_dir(out.path()).map_or(true, |mut entries| entries.next().is_none()),
        "an interrupted run writes no report"
    );
}

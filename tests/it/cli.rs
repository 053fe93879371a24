//! Every service binary has a `--help`, prints its effective settings with secrets masked, refuses a
//! bad setting with a message naming it, and shuts down cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rover_stack::{Process, SERVICES, command as service_command};

#[test]
fn help_describes_the_settings_layers_and_flags() {
    for service in SERVICES {
        let out = service_command(service)
            .unwrap()
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{service} --help failed");
        let text = String::from_utf8(out.stdout).unwrap();
        for needle in ["--config", "--print-config", "ROVER_", "Usage: "] {
            assert!(
                text.contains(needle),
                "{service} --help lacks {needle}:\n{text}"
            );
        }
    }
}

#[test]
fn print_config_layers_file_and_environment_and_masks_secrets() {
    let dir = std::env::temp_dir().join(format!("rover-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rover.toml");
    std::fs::write(&file, "[amqp]\nprefix = \"from-file\"\nprefetch = 3\n").unwrap();
    for service in SERVICES {
        let out = service_command(service)
            .unwrap()
            .args(["--print-config", "--config"])
            .arg(&file)
            .env("ROVER_AMQP__PREFETCH", "9")
            .env("ROVER_AMQP__URL", "amqp://rover:hunter2@broker:5672/%2f")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{service}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("prefix = \"from-file\""),
            "{service} ignored the file:\n{text}"
        );
        assert!(
            text.contains("prefetch = 9"),
            "{service} ignored the environment:\n{text}"
        );
        assert!(
            !text.contains("hunter2"),
            "{service} printed a secret:\n{text}"
        );
        assert!(
            text.contains("url = \"********\""),
            "{service} did not mask the URL:\n{text}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_bad_setting_or_missing_file_fails_start_up_with_a_clear_message() {
    for service in SERVICES {
        let out = service_command(service)
            .unwrap()
            .env("ROVER_AMQP__PREFETCH", "lots")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{service} accepted a bad prefetch"
        );
        let text = String::from_utf8(out.stderr).unwrap().to_lowercase();
        assert!(
            text.contains("amqp.prefetch") && text.contains("lots"),
            "{service}: {text}"
        );

        let out = service_command(service)
            .unwrap()
            .args(["--config", "/nonexistent/rover.toml"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("/nonexistent/rover.toml does not exist")
        );
    }
}

#[test]
fn the_tool_server_refuses_to_start_without_the_gateways_public_key() {
    let out = service_command("rover-toolserver")
        .unwrap()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("ROVER_IDENTITY__PUBLIC_KEY_FILE"), "{text}");
}

#[test]
fn the_gateway_has_no_default_secret_outside_development_mode() {
    let keys = rover_testkit::TurnKeys::generate();
    let start = |secret: Option<&str>| {
        let mut command = service_command("rover-gateway").unwrap();
        command.env("ROVER_IDENTITY__PRIVATE_KEY_FILE", keys.private_key_file());
        if let Some(secret) = secret {
            command.env("ROVER_AUTH__HS256_SECRET", secret);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(1), "it started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = start(None);
    assert!(
        missing.contains("ROVER_AUTH__HS256_SECRET") && missing.contains("ROVER_AUTH__DEVELOPMENT"),
        "{missing}"
    );
    let known = start(Some(rover_gateway::DEVELOPMENT_HS256_SECRET));
    assert!(known.contains("built-in development secret"), "{known}");
}

#[test]
fn db_setup_provisions_migrates_and_seeds_idempotently() {
    let name = format!("rover_cli_{}", std::process::id());
    let _cleanup = DropDatabase(name.clone());
    let setup = || {
        service_command("rover-toolserver")
            .unwrap()
            .args(["db", "setup", "--demo", "--database", &name])
            .args([
                "--owner-role",
                &format!("{name}_owner"),
                "--app-role",
                &format!("{name}_app"),
            ])
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        let out = setup();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("demo schools seeded"));
    }
    let psql = |sql: &str| {
        let out = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-d",
                &name,
                "-tAc",
                sql,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(
        psql("SELECT count(*) FROM schools"),
        "2",
        "seeded once, however often it runs"
    );
    assert_eq!(
        psql(&format!(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = '{name}_app'"
        )),
        "f"
    );
}

/// Drops a database made by `db setup`, and its two roles, when the test ends however it ends.
struct DropDatabase(String);

impl Drop for DropDatabase {
    fn drop(&mut self) {
        let name = &self.0;
        let _ = Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-q"])
            .args([
                "-c",
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            ])
            .args(["-c", &format!("DROP ROLE IF EXISTS {name}_app")])
            .args(["-c", &format!("DROP ROLE IF EXISTS {name}_owner")])
            .output();
    }
}

#[test]
fn services_log_their_settings_and_stop_on_sigterm() {
    // Each starts with its keys and a broker vhost of its own; the database pool connects lazily.
    let vhost = rover_testkit::TestVhost::create();
    let keys = rover_testkit::TurnKeys::generate();
    for service in SERVICES {
        let mut child = service_command(service)
            .unwrap()
            .env("ROVER_TELEMETRY__FORMAT", "json")
            .env("ROVER_AMQP__URL", vhost.url())
            .env("ROVER_HTTP__LISTEN", "127.0.0.1:0")
            .env("ROVER_HTTP__METRICS_ADDR", "127.0.0.1:0")
            .env("ROVER_AUTH__DEVELOPMENT", "true")
            .env("ROVER_IDENTITY__PUBLIC_KEY_FILE", keys.public_key_file())
            .env("ROVER_IDENTITY__PRIVATE_KEY_FILE", keys.private_key_file())
            .env("ROVER_DATABASE__URL", "postgres://app:hunter2@db/rover")
            .env(
                "ROVER_AGENT__SKILLS_DIR",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../skills"),
            )
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut process = Process::adopt(service, child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut logged = Vec::new();
        while !logged
            .iter()
            .any(|l: &String| l.contains("waiting for shutdown"))
        {
            logged.push(
                rx.recv_timeout(Duration::from_secs(20))
                    .unwrap_or_else(|_| panic!("{service} never became ready: {logged:?}")),
            );
        }
        let starting = logged
            .iter()
            .find(|l| l.contains("\"starting\""))
            .unwrap_or_else(|| panic!("{service}: {logged:?}"));
        let line: serde_json_line::Line = serde_json_line::parse(starting);
        assert_eq!(line.service, service);
        assert!(
            !starting.contains("hunter2"),
            "secret in the log: {starting}"
        );

        process.signal("TERM").unwrap();
        // The process closing its stdout (the reader thread ending) is the event that it exited.
        let mut rest = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(line) => rest.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{service} ignored SIGTERM: {rest:?}")
                }
            }
        }
        let exit = process.wait().unwrap();
        assert!(exit.success(), "{service} exited with {exit}");
        assert!(
            rest.iter().any(|l| l.contains("SIGTERM received")),
            "{service}: {rest:?}"
        );
    }
}

/// Just enough JSON to read one log line.
mod serde_json_line {
    #[derive(serde::Deserialize)]
    pub(super) struct Line {
        pub(super) service: String,
    }

    pub(super) fn parse(line: &str) -> Line {
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"))
    }
}

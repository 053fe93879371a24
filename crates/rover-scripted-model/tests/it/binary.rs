//! The binary itself: it says it is a test double, logs the address it bound, takes settings
//! from `ROVER_SCRIPTED__…` variables, and refuses a broken rules file naming the rule.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;

use crate::helpers::raw_http;

const BINARY: &str = env!("CARGO_BIN_EXE_rover-scripted-model");

fn command() -> Command {
    let mut command = Command::new(BINARY);
    command
        .env_remove("ROVER_CONFIG")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

#[tokio::test]
async fn help_names_it_a_test_double_and_lists_the_knobs() {
    let output = command().arg("--help").output().await.expect("runs");
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(help.contains("TEST DOUBLE"), "{help}");
    for flag in [
        "--listen",
        "--rules",
        "--first-token-delay-ms",
        "--chunk-delay-ms",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[tokio::test]
async fn it_logs_the_bound_address_and_reads_its_settings_from_the_environment() {
    let mut child = command()
        .args(["--listen", "127.0.0.1:0"])
        .env("ROVER_SCRIPTED__MODEL", "model-from-env")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawns");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("reads stdout") {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest.split_whitespace().next().expect("an address");
                return addr.parse().expect("a socket address");
            }
        }
        panic!("the binary exited without logging `listening on <addr>`");
    })
    .await
    .expect("the listening line within 30 s");

    let (status, body) = raw_http(addr, "GET", "/v1/models", None).await;
    assert_eq!(status, 200);
    assert!(body.contains("model-from-env"), "{body}");
    child.kill().await.expect("stops");
}

#[tokio::test]
async fn a_broken_rules_file_stops_it_with_the_rule_named() {
    let path = std::env::temp_dir().join(format!(
        "rover-scripted-model-{}-broken.toml",
        std::process::id()
    ));
    std::fs::write(
        &path,
        "[[rule]]\nname = \"oops\"\nwhen = \"(\"\nsteps = [{ say = \"x\" }]\n",
    )
    .expect("writes");
    let output = command()
        .args(["--listen", "127.0.0.1:0", "--rules"])
        .arg(&path)
        .output()
        .await
        .expect("runs");
    let _ = std::fs::remove_file(&path);
    assert!(!output.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(all.contains("rule `oops`: when: bad regex"), "{all}");
}

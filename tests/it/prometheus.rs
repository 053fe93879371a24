//! What an operator is handed, checked against the real thing: every service's `/metrics` passes
//! `promtool check metrics`; every series the Grafana dashboard (deploy/grafana/rover-turns.json)
//! queries is one the services export; no label value is an id, an email or a name; and
//! `make observe` (Debian's Prometheus with the very alert rules `make deploy-check` tests),
//! pointed at a running stack, evaluates every rule healthily, raises no alert, and holds the
//! dashboard's series after a turn.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::stack::Stack;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The folder holding `prometheus` and `promtool` (fetched once by the script if missing).
fn prometheus_bin() -> PathBuf {
    let output = Command::new(repo().join("deploy/local/ensure-prometheus.sh"))
        .output()
        .expect("deploy/local/ensure-prometheus.sh runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

/// A turn that moves every family a turn can: a write through a specialist.
async fn run_a_turn(stack: &Stack) {
    let turn = stack
        .say(
            "amina@hill.school",
            "chat-prometheus",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    assert_eq!(turn.finish_reason(), Some("stop"), "{:#?}", turn.chunks);
}

/// Each service's `/metrics`, by job name (as `make observe` and the PodMonitors name them).
async fn scrape_all(stack: &Stack) -> Vec<(&'static str, SocketAddr, String)> {
    let mut scraped = Vec::new();
    for (job, addr) in [
        ("rover-gateway", stack.gateway_metrics),
        ("rover-worker", stack.worker_http),
        ("rover-toolserver", stack.toolserver_http),
    ] {
        scraped.push((job, addr, crate::observability::scrape(stack, addr).await));
    }
    scraped
}

/// OpenMetrics text as the classic Prometheus text format, which is what `promtool check metrics`
/// reads: a counter family's `HELP` and `TYPE` name its `_total` series (OpenMetrics names the
/// family without it), and `# EOF` goes. Nothing else changes, so promtool sees every sample,
/// name, label and help text the services serve.
fn classic(openmetrics: &str) -> String {
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut text = String::new();
    for line in openmetrics.lines().filter(|line| *line != "# EOF") {
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (family, tail) = rest.split_once(' ')?;
            counters
                .contains(&family)
                .then(|| format!("{prefix}{family}_total {tail}"))
        });
        text.push_str(renamed.as_deref().unwrap_or(line));
        text.push('\n');
    }
    text
}

/// The series names a metrics text can carry, from its `# TYPE` lines: a counter's `_total`, a
/// histogram's `_bucket`, `_sum` and `_count`, a gauge's own name; with whether any sample of
/// the family is present.
fn exported(texts: &[&str]) -> HashMap<String, (String, bool)> {
    let mut series = HashMap::new();
    for text in texts {
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("# TYPE ") else {
                continue;
            };
            let (family, kind) = rest.split_once(' ').unwrap();
            let names: Vec<String> = match kind {
                "counter" => vec![format!("{family}_total")],
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .map(|suffix| format!("{family}{suffix}"))
                    .collect(),
                _ => vec![family.to_owned()],
            };
            let sampled = text
                .lines()
                .any(|sample| !sample.starts_with('#') && sample.starts_with(family));
            for name in names {
                let entry = series
                    .entry(name)
                    .or_insert_with(|| (family.to_owned(), false));
                entry.1 |= sampled;
            }
        }
    }
    series
}

/// PromQL words that are not series: aggregations, operators, grouping and modifiers.
const PROMQL_WORDS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
];

/// Every series name a PromQL expression selects, whatever its prefix: the identifiers left once
/// strings, label matchers `{…}` and ranges `[…]` are skipped, that are neither functions (a name
/// followed by `(`) nor [`PROMQL_WORDS`]; the label lists of `by (…)`, `on (…)` and the like are
/// skipped too.
fn series_in(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let skip_to = |from: usize, close: char| {
        chars[from..]
            .iter()
            .position(|c| *c == close)
            .map_or(chars.len(), |at| from + at + 1)
    };
    let mut names = BTreeSet::new();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        match c {
            '"' | '\'' | '`' => at = skip_to(at + 1, c),
            '{' => at = skip_to(at + 1, '}'),
            '[' => at = skip_to(at + 1, ']'),
            c if c.is_ascii_digit() || c == '.' => {
                // A number or a duration: digits, a dot, an exponent or a unit, all skipped.
                while at < chars.len() && (chars[at].is_ascii_alphanumeric() || chars[at] == '.') {
                    at += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = at;
                while at < chars.len()
                    && (chars[at].is_ascii_alphanumeric() || chars[at] == '_' || chars[at] == ':')
                {
                    at += 1;
                }
                let word: String = chars[start..at].iter().collect();
                let next = chars[at..].iter().find(|c| !c.is_whitespace());
                let grouping = [
                    "by",
                    "without",
                    "on",
                    "ignoring",
                    "group_left",
                    "group_right",
                ];
                if grouping.contains(&word.as_str()) && next == Some(&'(') {
                    at = skip_to(at, ')');
                } else if next != Some(&'(') && !PROMQL_WORDS.contains(&word.as_str()) {
                    names.insert(word);
                }
            }
            _ => at += 1,
        }
    }
    names
}

#[test]
fn series_in_a_query_are_every_selected_name_and_nothing_else() {
    let expr = "histogram_quantile(0.99, sum by (le, event) (rate(rover_rpc_duration_seconds_bucket\
                {job=\"rover-worker\", event!~\"a|b\"}[5m] offset 1h))) / on (instance) \
                group_left(version) up > bool 1e3 unless count without (x) (process_open_fds)";
    assert_eq!(
        series_in(expr),
        BTreeSet::from(
            [
                "process_open_fds",
                "rover_rpc_duration_seconds_bucket",
                "up"
            ]
            .map(str::to_owned)
        )
    );
}

/// Every series each dashboard panel's queries name, by panel title.
fn dashboard_series() -> Vec<(String, BTreeSet<String>)> {
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("deploy/grafana/rover-turns.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    dashboard["panels"]
        .as_array()
        .expect("the dashboard has panels")
        .iter()
        .map(|panel| {
            let mut names = BTreeSet::new();
            for target in panel["targets"].as_array().unwrap() {
                names.extend(series_in(target["expr"].as_str().unwrap()));
            }
            (panel["title"].as_str().unwrap().to_owned(), names)
        })
        .collect()
}

#[tokio::test]
async fn every_services_metrics_pass_promtool_and_the_dashboard_names_only_exported_series() {
    let stack = Stack::start().await;
    run_a_turn(&stack).await;
    let scraped = scrape_all(&stack).await;
    let promtool = prometheus_bin().join("promtool");
    for (job, _, text) in &scraped {
        assert!(text.ends_with("# EOF\n"), "{job} renders OpenMetrics");
        let mut child = Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), classic(text).as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "promtool check metrics on {job}:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let texts: Vec<&str> = scraped.iter().map(|(_, _, text)| text.as_str()).collect();
    let exported = exported(&texts);
    let panels = dashboard_series();
    assert!(panels.len() >= 10, "{panels:?}");
    for (title, names) in panels {
        assert!(!names.is_empty(), "panel {title:?} queries no series");
        for name in names {
            assert!(
                exported.contains_key(&name),
                "panel {title:?} queries {name}, which no service exports"
            );
        }
    }
}

/// Every label value of every sample in a metrics text, with the sample's line.
fn label_values(text: &str) -> Vec<(String, String)> {
    let mut values = Vec::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((_, rest)) = line.split_once('{') else {
            continue;
        };
        let labels = rest.rsplit_once('}').map_or(rest, |(labels, _)| labels);
        // Rover's label values never hold a quote, so splitting on `"` is exact here.
        for value in labels.split('"').skip(1).step_by(2) {
            values.push((line.to_owned(), value.to_owned()));
        }
    }
    values
}

/// Label cardinality stays bounded: after turns by staff of two schools, in chats with ids the
/// client chose, no label value on any service is an id (every id here is a UUID: schools,
/// users, threads, turns, approvals, calls), an email, a school's name or a chat id.
#[tokio::test]
async fn no_metric_label_names_a_user_a_chat_a_school_or_any_id() {
    let stack = Stack::start().await;
    let lakeside_chat = uuid::Uuid::new_v4().to_string();
    for (email, chat, text) in [
        (
            "amina@hill.school",
            "cardinality-amina",
            "Record attendance for S1 Blue: everyone present except Nakato",
        ),
        (
            "admin@lakeside.college",
            lakeside_chat.as_str(),
            "Create a department called Sciences",
        ),
        (
            "okello@hill.school",
            "cardinality-okello",
            "What can you do?",
        ),
    ] {
        let turn = stack.say(email, chat, text).await;
        assert_eq!(turn.finish_reason(), Some("stop"), "{:#?}", turn.chunks);
    }
    let mut private: Vec<String> = sqlx::query_scalar(
        "SELECT id::text FROM schools UNION ALL SELECT name FROM schools
         UNION ALL SELECT id::text FROM users UNION ALL SELECT email FROM users
         UNION ALL SELECT id::text FROM threads UNION ALL SELECT turn_id::text FROM chat_turns",
    )
    .fetch_all(&stack.owner)
    .await
    .unwrap();
    private.extend(
        [
            "cardinality-amina",
            "cardinality-okello",
            lakeside_chat.as_str(),
        ]
        .map(str::to_owned),
    );
    assert!(private.len() > 20, "{private:?}");

    let scraped = scrape_all(&stack).await;
    let mut seen = BTreeSet::new();
    for (job, _, text) in &scraped {
        for (line, value) in label_values(text) {
            assert!(
                uuid::Uuid::parse_str(&value).is_err(),
                "{job}: a label holds an id: {line}"
            );
            for secret in &private {
                assert!(
                    !value.contains(secret.as_str()),
                    "{job}: a label holds {secret:?}: {line}"
                );
            }
            seen.insert(value);
        }
    }
    // The check looked at the labels a turn writes: its tool's event, the model, the outcome.
    for value in ["record.attendance", "rover-scripted", "ok"] {
        assert!(seen.contains(value), "no label {value:?} in {seen:?}");
    }
}

/// A free port on loopback (bound, then released for Prometheus to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `make observe`'s script (deploy/local/observe.sh) on a port and folder of its own, scraping
/// this stack every second; killed when dropped.
struct Prometheus {
    child: std::process::Child,
    url: String,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(stack: &Stack) -> Prometheus {
        let dir = std::env::temp_dir().join(format!("rover-observe-{}", uuid::Uuid::new_v4()));
        let listen = format!("127.0.0.1:{}", free_port());
        // The script `exec`s Prometheus, so this child is Prometheus itself once it runs.
        let child = Command::new(repo().join("deploy/local/observe.sh"))
            .env("ROVER_OBSERVE_LISTEN", &listen)
            .env("ROVER_OBSERVE_DIR", &dir)
            .env("ROVER_OBSERVE_INTERVAL", "1s")
            .env("ROVER_OBSERVE_GATEWAY", stack.gateway_metrics.to_string())
            .env("ROVER_OBSERVE_WORKER", stack.worker_http.to_string())
            .env(
                "ROVER_OBSERVE_TOOLSERVER",
                stack.toolserver_http.to_string(),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("deploy/local/observe.sh starts");
        Prometheus {
            child,
            url: format!("http://{listen}"),
            _dir: TempDir(dir),
        }
    }

    async fn get(&self, http: &reqwest::Client, path: &str, query: &[(&str, &str)]) -> Value {
        match http
            .get(format!("{}{path}", self.url))
            .query(query)
            .send()
            .await
        {
            Ok(response) => response.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        }
    }
}

/// Polls `check` until it holds, or fails after `within` saying `what`.
pub(crate) async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + within;
    loop {
        match check().await {
            Ok(()) => return,
            Err(last) if Instant::now() > deadline => panic!("{what}: {last}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

#[tokio::test]
async fn prometheus_scrapes_the_stack_evaluates_every_alert_and_holds_the_dashboards_series() {
    let stack = Stack::start().await;
    let prometheus = Prometheus::start(&stack);
    run_a_turn(&stack).await;
    let scraped = scrape_all(&stack).await;
    let texts: Vec<&str> = scraped.iter().map(|(_, _, text)| text.as_str()).collect();
    let exported = exported(&texts);
    let http = &stack.http;

    // Every target up, every rule loaded and evaluated without error.
    let alerts = std::fs::read_to_string(repo().join("deploy/k8s/base/monitoring.yaml"))
        .unwrap()
        .lines()
        .filter(|line| line.trim_start().starts_with("- alert: "))
        .count();
    assert!(alerts >= 9, "{alerts} alerts in monitoring.yaml");
    eventually("every target up", Duration::from_secs(60), || async {
        let targets = prometheus.get(http, "/api/v1/targets", &[]).await;
        let active = targets["data"]["activeTargets"].as_array().cloned();
        let up = active
            .iter()
            .flatten()
            .filter(|t| t["health"] == "up")
            .count();
        (up == 3).then_some(()).ok_or(format!("{targets}"))
    })
    .await;
    eventually(
        "every alert rule evaluated healthily",
        Duration::from_secs(60),
        || async {
            let rules = prometheus.get(http, "/api/v1/rules", &[]).await;
            let all: Vec<&Value> = rules["data"]["groups"]
                .as_array()
                .iter()
                .flat_map(|groups| groups.iter())
                .flat_map(|group| group["rules"].as_array().into_iter().flatten())
                .collect();
            let healthy = all.iter().filter(|rule| rule["health"] == "ok").count();
            (all.len() == alerts && healthy == alerts)
                .then_some(())
                .ok_or(format!("{rules}"))
        },
    )
    .await;

    // Every series the dashboard draws: held with samples when the stack has any, else known to
    // Prometheus from the family's HELP and TYPE (a labelled counter nothing has moved yet).
    for (title, names) in dashboard_series() {
        for name in names {
            let (family, sampled) = exported
                .get(&name)
                .unwrap_or_else(|| panic!("panel {title:?}: no service exports {name}"))
                .clone();
            let what = format!("panel {title:?}: {name}");
            eventually(&what, Duration::from_secs(60), || async {
                if sampled {
                    let answer = prometheus
                        .get(http, "/api/v1/query", &[("query", name.as_str())])
                        .await;
                    let found = answer["data"]["result"]
                        .as_array()
                        .is_some_and(|result| !result.is_empty());
                    found.then_some(()).ok_or(format!("{answer}"))
                } else {
                    let answer = prometheus
                        .get(http, "/api/v1/metadata", &[("metric", family.as_str())])
                        .await;
                    let known = answer["data"]
                        .as_object()
                        .is_some_and(|data| !data.is_empty());
                    known.then_some(()).ok_or(format!("{answer}"))
                }
            })
            .await;
        }
    }
    // A healthy stack raises no alert, pending or firing (a job named otherwise than the alerts
    // expect would leave RoverServiceDown pending here).
    eventually(
        "no alert pending or firing",
        Duration::from_secs(60),
        || async {
            let answer = prometheus.get(http, "/api/v1/alerts", &[]).await;
            let quiet = answer["data"]["alerts"]
                .as_array()
                .is_some_and(Vec::is_empty);
            quiet.then_some(()).ok_or(format!("{answer}"))
        },
    )
    .await;
    // The turn's own work shows once scraped: one completed turn.
    eventually(
        "the turn counted as completed",
        Duration::from_secs(60),
        || async {
            let answer = prometheus
                .get(
                    http,
                    "/api/v1/query",
                    &[("query", "sum(rover_turns_completed_total)")],
                )
                .await;
            (answer["data"]["result"][0]["value"][1] == "1")
                .then_some(())
                .ok_or(format!("{answer}"))
        },
    )
    .await;
}

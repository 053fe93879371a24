//! `make deploy-check` (deploy/check.sh) passes on the real manifests and fails, naming the object,
//! on a deliberately broken copy: a built-in kind with a wrong type, a KEDA object with an unknown
//! field, a kind no schema describes, an alert threshold its unit tests no longer agree with (and
//! an overlay that changes one passes only with tests of its own), an alert rule that does not
//! parse, an alert tested only one way, an alert without its runbook section, a PodMonitor on a
//! port its pods lack, metrics admitted from anywhere, database pools that at their maximum
//! replicas would not fit the server's connections, and a dev Postgres that runs with another
//! limit than the one budgeted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (this crate lives in `tests/`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Runs the real check script against `deploy_dir` (or the real deploy/ when `None`).
fn deploy_check(deploy_dir: Option<&Path>) -> Output {
    let mut command = Command::new(repo().join("deploy/check.sh"));
    if let Some(dir) = deploy_dir {
        command.arg(dir);
    }
    command
        .current_dir(repo())
        .output()
        .expect("deploy/check.sh runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A copy of deploy/ in a fresh temporary folder, removed when dropped.
struct DeployCopy(PathBuf);

impl DeployCopy {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "rover-deploy-{name}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        copy_dir(&repo().join("deploy"), &dir);
        DeployCopy(dir)
    }

    /// Replaces `from` with `to` in one file; the file must contain `from`, so a break that
    /// silently stopped applying cannot make the test pass.
    fn edit(&self, file: &str, from: &str, to: &str) {
        let path = self.0.join(file);
        let before = std::fs::read_to_string(&path).unwrap();
        assert!(before.contains(from), "{file} no longer contains {from:?}");
        std::fs::write(&path, before.replacen(from, to, 1)).unwrap();
    }
}

impl DeployCopy {
    /// Replaces every `from` with `to` in one file, which must contain it.
    fn edit_all(&self, file: &str, from: &str, to: &str) {
        let path = self.0.join(file);
        let before = std::fs::read_to_string(&path).unwrap();
        assert!(before.contains(from), "{file} no longer contains {from:?}");
        std::fs::write(&path, before.replace(from, to)).unwrap();
    }

    /// Uncomments the prod overlay's example of changing an alert threshold (its lines from
    /// `# patches:` on), so the example is exactly what the test applies.
    fn apply_the_prod_threshold_example(&self) {
        let file = "k8s/overlays/prod/kustomization.yaml";
        let text = std::fs::read_to_string(self.0.join(file)).unwrap();
        let at = text
            .find("# patches:\n")
            .expect("the prod overlay shows how to change a threshold");
        let example: String = text[at..]
            .lines()
            .map(|line| {
                line.strip_prefix("# ")
                    .unwrap_or(line.trim_start_matches('#'))
            })
            .map(|line| format!("{line}\n"))
            .collect();
        std::fs::write(self.0.join(file), format!("{}{example}", &text[..at])).unwrap();
    }
}

impl Drop for DeployCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_real_manifests_render_and_validate() {
    let output = deploy_check(None);
    let text = text(&output);
    assert!(output.status.success(), "deploy-check failed:\n{text}");
    for needle in [
        "deploy-check: dev:",
        "deploy-check: prod:",
        "deploy-check: prod: alert rules pass promtool check rules and every unit test",
        "deploy-check: dev: database connections fit:",
        "deploy-check: prod: database connections fit: rover-gateway 6 x (10 max + 1 surge) + \
         rover-toolserver 8 x (20 max + 1 surge) + rover-worker 8 x (20 max + 1 surge) = 402 \
         pooled, + 20 reserved for migrations and operators + 3 superuser-reserved = 425 <= \
         max_connections 500",
        "every overlay renders and validates",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }
}

#[test]
fn a_deployment_with_a_wrong_type_fails_naming_it() {
    let copy = DeployCopy::new("replicas");
    copy.edit(
        "k8s/base/worker.yaml",
        "  revisionHistoryLimit: 5\n",
        "  replicas: \"two\"\n  revisionHistoryLimit: 5\n",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(
        !output.status.success(),
        "a broken Deployment passed:\n{text}"
    );
    assert!(
        text.contains("FAIL dev: Deployment/rover-worker: spec.replicas:")
            && text.contains("FAIL prod: Deployment/rover-worker: spec.replicas:"),
        "the failure does not name the object and field:\n{text}"
    );
}

#[test]
fn a_scaled_object_with_an_unknown_field_fails_naming_it() {
    let copy = DeployCopy::new("keda");
    copy.edit(
        "k8s/base/keda.yaml",
        "        queueName: rover.tools\n",
        "        queueName: rover.tools\n        queueLenght: \"5\"\n",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(
        !output.status.success(),
        "a broken ScaledObject passed:\n{text}"
    );
    assert!(
        text.contains("ScaledObject/rover-toolserver") && text.contains("queueLenght"),
        "the failure does not name the object and field:\n{text}"
    );
}

#[test]
fn the_prod_rabbitmq_cluster_is_three_replicas_and_a_misspelt_field_fails_naming_it() {
    let manifest = std::fs::read_to_string(repo().join("deploy/k8s/overlays/prod/rabbitmq.yaml"))
        .expect("the prod overlay's RabbitmqCluster");
    assert!(
        manifest.contains("kind: RabbitmqCluster") && manifest.contains("\n  replicas: 3\n"),
        "a three-node RabbitmqCluster"
    );
    let copy = DeployCopy::new("rabbitmqcluster");
    copy.edit(
        "k8s/overlays/prod/rabbitmq.yaml",
        "  replicas: 3\n",
        "  replicas: 3\n  replica: 3\n",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(
        !output.status.success(),
        "a broken RabbitmqCluster passed:\n{text}"
    );
    assert!(
        text.contains("RabbitmqCluster/rover-rabbitmq") && text.contains("replica"),
        "the failure does not name the object and field:\n{text}"
    );
}

#[test]
fn a_kind_without_a_schema_fails_rather_than_being_skipped() {
    let copy = DeployCopy::new("unknown-kind");
    std::fs::write(
        copy.0.join("k8s/overlays/prod/monitor.yaml"),
        "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: rover\n\
         spec:\n  selector: {}\n  endpoints: []\n",
    )
    .unwrap();
    copy.edit(
        "k8s/overlays/prod/kustomization.yaml",
        "  - ../../base\n",
        "  - ../../base\n  - monitor.yaml\n",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(!output.status.success(), "an unknown kind passed:\n{text}");
    assert!(
        text.contains("FAIL prod: ServiceMonitor/rover: no schema"),
        "the failure does not name the object:\n{text}"
    );
}

/// An alert whose threshold no longer matches its unit tests fails `promtool test rules`, naming
/// the alert: the tests pin every threshold from both sides.
#[test]
fn an_alert_threshold_that_drifts_from_its_tests_fails_naming_the_alert() {
    let copy = DeployCopy::new("threshold");
    copy.edit(
        "k8s/base/monitoring.yaml",
        "            ) > 0.05\n",
        "            ) > 0.5\n",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(
        !output.status.success(),
        "a drifted threshold passed:\n{text}"
    );
    assert!(
        text.contains("FAIL prod: promtool test rules") && text.contains("RoverTurnsFailing"),
        "the failure does not name the alert:\n{text}"
    );
}

/// A rule that is not valid PromQL fails `promtool check rules`.
#[test]
fn an_alert_rule_that_does_not_parse_fails_the_check() {
    let copy = DeployCopy::new("promql");
    copy.edit(
        "k8s/base/monitoring.yaml",
        "expr: max(rover_approval_oldest_wait_seconds) > 3600",
        "expr: max(rover_approval_oldest_wait_seconds > 3600",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(
        !output.status.success(),
        "an unparsable rule passed:\n{text}"
    );
    assert!(
        text.contains("FAIL prod: promtool check rules"),
        "the failure does not say which check:\n{text}"
    );
}

/// The prod overlay's example of changing a threshold (approvals may wait two hours) fails the
/// check against the base's tests, naming the alert, and passes once the overlay carries tests
/// of its own that agree with its number: a threshold is a setting, and its tests move with it.
#[test]
fn an_overlay_that_changes_a_threshold_passes_only_with_its_own_tests() {
    let copy = DeployCopy::new("overlay-threshold");
    copy.apply_the_prod_threshold_example();
    let output = deploy_check(Some(&copy.0));
    let failed = text(&output);
    assert!(
        !output.status.success(),
        "prod's changed threshold passed the base's tests:\n{failed}"
    );
    assert!(
        failed.contains("FAIL prod: promtool test rules monitoring/alerts.test.yaml")
            && failed.contains("RoverApprovalsWaiting")
            && failed.contains("deploy-check: dev: alert rules pass"),
        "the failure does not name the overlay and alert:\n{failed}"
    );

    let base = std::fs::read_to_string(copy.0.join("monitoring/alerts.test.yaml")).unwrap();
    let own = base
        .replace("values: 3000+60x30", "values: 6600+60x30")
        .replace("has waited 1h 10m 0s", "has waited 2h 10m 0s");
    assert_ne!(own, base, "the approvals case moved in the base's tests");
    std::fs::write(copy.0.join("k8s/overlays/prod/alerts.test.yaml"), own).unwrap();
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(output.status.success(), "deploy-check failed:\n{text}");
    assert!(
        text.contains(
            "deploy-check: prod: alert rules pass promtool check rules and every unit test \
             (k8s/overlays/prod/alerts.test.yaml)"
        ),
        "prod was not tested with its own tests:\n{text}"
    );
}

/// An alert whose unit tests only ever expect it quiet passes promtool (a rule that can never
/// fire would too); the check requires a firing case for every alert.
#[test]
fn an_alert_never_tested_firing_fails_naming_it() {
    let copy = DeployCopy::new("untested");
    copy.edit(
        "monitoring/alerts.test.yaml",
        "      - eval_time: 4m
        alertname: RoverModelFallingBack
        exp_alerts:
          - exp_labels: { severity: ticket }
            exp_annotations:
              summary: \"Model calls are being answered by a fallback endpoint\"
              runbook: docs/runbook.md#rovermodelfallingback
",
        "",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(
        !output.status.success(),
        "an alert never tested firing passed:\n{text}"
    );
    assert!(
        text.contains("deploy-check: prod: alert rules pass promtool")
            && text.contains("FAIL prod: alerts untested or without a runbook section")
            && text.contains("RoverModelFallingBack: no unit test")
            && text.contains("expects it to fire"),
        "the failure does not name the alert:\n{text}"
    );
}

/// An alert without its section in docs/runbook.md fails, naming it.
#[test]
fn an_alert_without_a_runbook_section_fails_naming_it() {
    let copy = DeployCopy::new("runbook");
    copy.edit(
        "k8s/base/monitoring.yaml",
        "- alert: RoverModelFallingBack\n",
        "- alert: RoverModelFallback\n",
    );
    copy.edit_all(
        "monitoring/alerts.test.yaml",
        "alertname: RoverModelFallingBack\n",
        "alertname: RoverModelFallback\n",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(
        !output.status.success(),
        "an alert without a runbook section passed:\n{text}"
    );
    assert!(
        text.contains("deploy-check: prod: alert rules pass promtool")
            && text.contains(
                "RoverModelFallback: docs/runbook.md has no '## RoverModelFallback' section"
            ),
        "the failure does not name the alert:\n{text}"
    );
}

/// A PodMonitor whose port is not one its pods name scrapes nothing; the check says so.
#[test]
fn a_pod_monitor_on_a_port_the_pods_do_not_have_fails_naming_it() {
    let copy = DeployCopy::new("podmonitor");
    copy.edit(
        "k8s/base/monitoring.yaml",
        "    - port: metrics\n",
        "    - port: prometheus\n",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(
        !output.status.success(),
        "a PodMonitor on a missing port passed:\n{text}"
    );
    assert!(
        text.contains(
            "FAIL prod: PodMonitor/rover-gateway: port 'prometheus' is not a named port of the pods"
        ),
        "the failure does not name the monitor:\n{text}"
    );
}

/// The gateway's metrics stay off its public side: a NetworkPolicy that admits the metrics port
/// from anywhere (as the public port is) fails the check.
#[test]
fn metrics_admitted_from_anywhere_fail_naming_the_policy() {
    let copy = DeployCopy::new("public-metrics");
    copy.edit(
        "k8s/base/networkpolicies.yaml",
        "    - ports:\n        - port: 8080\n          protocol: TCP\n",
        "    - ports:\n        - port: 8080\n          protocol: TCP\n        - port: 9090\n          protocol: TCP\n",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(!output.status.success(), "public metrics passed:\n{text}");
    assert!(
        text.contains(
            "FAIL prod: PodMonitor/rover-gateway: NetworkPolicy/rover-gateway admits metrics port \
             9090 from more than the rover.dev/metrics-scraper namespace"
        ),
        "the failure does not name the policy:\n{text}"
    );
}

/// The dev overlay's RabbitMQ makes each service's broker user with exactly the rights
/// `Topology::permissions` gives it (what `rover-toolserver broker setup` prints).
#[test]
fn pools_that_would_not_fit_the_databases_connections_fail_naming_the_overlay_and_the_numbers() {
    let copy = DeployCopy::new("connections");
    // Twice the workers at most: prod's pools no longer fit its 500 connections (dev caps its
    // workers at 3 itself, so it still fits).
    copy.edit(
        "k8s/base/keda.yaml",
        "  minReplicaCount: 2\n  maxReplicaCount: 20\n",
        "  minReplicaCount: 2\n  maxReplicaCount: 40\n",
    );
    let output = deploy_check(Some(&copy.0));
    let over = text(&output);
    assert!(!output.status.success(), "over budget passed:\n{over}");
    assert!(
        over.contains(
            "FAIL prod: database connections do not fit: rover-gateway 6 x (10 max + 1 surge) + \
             rover-toolserver 8 x (20 max + 1 surge) + rover-worker 8 x (40 max + 1 surge) = 562 \
             pooled, + 20 reserved for migrations and operators + 3 superuser-reserved = 585 > \
             max_connections 500 (ConfigMap/rover-postgres-budget), 85 over."
        ),
        "{over}"
    );
    assert!(
        over.contains("ScaledObject/rover-worker") && over.contains("transaction pooler"),
        "{over}"
    );
    assert!(
        over.contains("deploy-check: dev: database connections fit:"),
        "{over}"
    );

    // A service whose pool size is left to its default is not budgeted silently.
    let copy = DeployCopy::new("connections-unset");
    copy.edit(
        "k8s/base/gateway.yaml",
        "            - name: ROVER_DATABASE__MAX_CONNECTIONS\n              value: \"6\"\n",
        "",
    );
    let output = deploy_check(Some(&copy.0));
    let unset = text(&output);
    assert!(!output.status.success(), "an unset pool passed:\n{unset}");
    assert!(
        unset.contains(
            "FAIL dev: database connections: Deployment/rover-gateway container gateway connects \
             to the database without ROVER_DATABASE__MAX_CONNECTIONS"
        ),
        "{unset}"
    );
}

#[test]
fn a_dev_postgres_running_another_limit_than_the_budget_fails_naming_both() {
    let copy = DeployCopy::new("connections-postgres");
    copy.edit(
        "k8s/overlays/dev/postgres.yaml",
        "max_connections=100",
        "max_connections=50",
    );
    let output = deploy_check(Some(&copy.0));
    let text = text(&output);
    assert!(!output.status.success(), "a mismatch passed:\n{text}");
    assert!(
        text.contains(
            "FAIL dev: database connections: Deployment/postgres runs Postgres with \
             max_connections=50, but ConfigMap/rover-postgres-budget says 100"
        ),
        "{text}"
    );
}

#[test]
fn the_dev_brokers_service_users_have_exactly_the_rights_rover_computes() {
    use rover_messaging::{Service, Topology};
    let script = std::fs::read_to_string(repo().join("deploy/k8s/overlays/dev/rabbitmq.yaml"))
        .expect("the dev RabbitMQ manifest");
    let topology = Topology::new("rover");
    for (user, service) in [
        ("rover-gateway", Service::Gateway),
        ("rover-worker", Service::Worker),
        ("rover-toolserver", Service::ToolServer),
    ] {
        let rights = topology.permissions(service);
        let line = format!(
            "add {user} '{}' '{}' '{}'",
            rights.configure, rights.write, rights.read
        );
        assert!(script.contains(&line), "the dev broker lacks: {line}");
    }
}

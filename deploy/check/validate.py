"""Validates rendered Kubernetes manifests offline: `deploy/check.sh` runs it on every overlay.

Every object must pass a JSON schema, strictly (unknown fields are errors):
  - built-in kinds against the Kubernetes schemas bundled in the `kubernetes-validate` package;
  - custom kinds (KEDA's ScaledObject, TriggerAuthentication; the Prometheus Operator's PodMonitor,
    PrometheusRule) against the schemas vendored in deploy/schemas/
    (`<kind>-<group>-<version>.json`).
An object whose kind has neither is a failure, never a silent skip. Then a few of Rover's own rules
(probes, resources, non-root, disruption budgets, references, no inlined secrets, PodMonitors that
scrape a named port of their pods which only the scraper's namespace may reach) are checked.

Sockets are disabled before anything is loaded, so a schema can never come from the network.

Usage: validate.py --k8s-version 1.32 --schemas DIR NAME=RENDERED.yaml [NAME=RENDERED.yaml ...]
Exit status: 0 when every object of every overlay passes, 1 otherwise.
"""

import argparse
import json
import re
import socket
import sys
from pathlib import Path


def _no_network(*_args, **_kwargs):
    raise OSError("deploy-check validates offline: no network access is allowed")


socket.socket.connect = _no_network  # type: ignore[method-assign]
socket.socket.connect_ex = _no_network  # type: ignore[method-assign]
socket.create_connection = _no_network  # type: ignore[assignment]
socket.getaddrinfo = _no_network  # type: ignore[assignment]

import jsonschema  # noqa: E402
import kubernetes_validate  # noqa: E402
import yaml  # noqa: E402

# Rover's own workloads: the rules below apply to these (third-party dev dependencies such as
# RabbitMQ and Postgres keep their upstream images' conventions).
PART_OF = "app.kubernetes.io/part-of"
DEV_ONLY = "rover.dev/development-only"
METRICS_SCRAPER = "rover.dev/metrics-scraper"
CREDENTIAL_URL = re.compile(r"://[^/@\s]+:[^/@\s]+@")


def ident(obj):
    return f"{obj.get('kind', '?')}/{(obj.get('metadata') or {}).get('name', '?')}"


def path_of(error):
    return ".".join(str(p) for p in error.absolute_path) or "(root)"


class Checker:
    def __init__(self, k8s_version, schemas_dir):
        self.k8s_version = k8s_version
        self.schemas_dir = Path(schemas_dir)
        self.problems = []

    def fail(self, overlay, obj, message):
        problem = f"FAIL {overlay}: {ident(obj)}: {message}"
        if problem not in self.problems:  # one mistake can break two nested schemas alike
            self.problems.append(problem)

    # --- schemas -------------------------------------------------------------------------------

    def custom_schema(self, obj):
        api_version = obj.get("apiVersion", "")
        if "/" not in api_version:
            return None
        group, version = api_version.split("/", 1)
        if "." not in group:  # a built-in group (apps, batch, policy, …)
            return None
        path = self.schemas_dir / f"{obj.get('kind', '').lower()}-{group}-{version}.json"
        if not path.is_file():
            return None
        return json.loads(path.read_text())

    def validate_schema(self, overlay, obj):
        if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
            self.problems.append(f"FAIL {overlay}: a document without apiVersion/kind: {obj!r:.80}")
            return
        schema = self.custom_schema(obj)
        if schema is not None:
            validator = jsonschema.Draft202012Validator(schema)
            for error in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path)):
                self.fail(overlay, obj, f"{path_of(error)}: {error.message}")
            return
        try:
            kubernetes_validate.validate(obj, self.k8s_version, strict=True)
        except kubernetes_validate.ValidationError as error:
            self.fail(overlay, obj, f"{path_of(error)}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError:
            self.fail(
                overlay,
                obj,
                f"no schema for apiVersion {obj['apiVersion']} kind {obj['kind']}: not a "
                f"Kubernetes {self.k8s_version} kind, and no "
                f"{obj['kind'].lower()}-<group>-<version>.json in {self.schemas_dir}",
            )

    # --- Rover's rules -------------------------------------------------------------------------

    def check_rules(self, overlay, objects):
        by_kind = {}
        for obj in objects:
            if isinstance(obj, dict):
                by_kind.setdefault(obj.get("kind"), []).append(obj)
        names = {kind: {o["metadata"]["name"] for o in objs} for kind, objs in by_kind.items()}

        for secret in by_kind.get("Secret", []):
            labels = secret["metadata"].get("labels") or {}
            if labels.get(DEV_ONLY) != "true":
                self.fail(
                    overlay,
                    secret,
                    f"secrets are referenced, never inlined (only a development overlay may "
                    f"generate one, labelled {DEV_ONLY}: \"true\")",
                )

        pdbs = by_kind.get("PodDisruptionBudget", [])
        for obj in by_kind.get("Deployment", []) + by_kind.get("Job", []):
            pod = obj["spec"]["template"]
            labels = obj["metadata"].get("labels") or {}
            ours = labels.get(PART_OF) == "rover"
            self.check_env(overlay, obj, pod["spec"])
            if not ours:
                continue
            self.check_pod(overlay, obj, pod["spec"], probes=obj["kind"] == "Deployment")
            if obj["kind"] == "Deployment":
                pod_labels = pod["metadata"].get("labels") or {}
                if not any(selects(p["spec"].get("selector"), pod_labels) for p in pdbs):
                    self.fail(overlay, obj, "no PodDisruptionBudget selects its pods")

        for obj in by_kind.get("HorizontalPodAutoscaler", []) + by_kind.get("ScaledObject", []):
            target = obj["spec"]["scaleTargetRef"]
            kind = target.get("kind", "Deployment")
            if target["name"] not in names.get(kind, set()):
                self.fail(overlay, obj, f"scales {kind}/{target['name']}, which is not rendered")
        for obj in by_kind.get("ScaledObject", []):
            for trigger in obj["spec"]["triggers"]:
                ref = trigger.get("authenticationRef")
                if ref and ref.get("kind", "TriggerAuthentication") == "TriggerAuthentication":
                    if ref["name"] not in names.get("TriggerAuthentication", set()):
                        self.fail(
                            overlay,
                            obj,
                            f"uses TriggerAuthentication/{ref['name']}, which is not rendered",
                        )
        for monitor in by_kind.get("PodMonitor", []):
            self.check_pod_monitor(overlay, monitor, by_kind)
        for obj in by_kind.get("Deployment", []):
            sa = obj["spec"]["template"]["spec"].get("serviceAccountName")
            if sa and sa not in names.get("ServiceAccount", set()):
                self.fail(overlay, obj, f"runs as ServiceAccount/{sa}, which is not rendered")

    def check_pod_monitor(self, overlay, monitor, by_kind):
        """A PodMonitor scrapes something real, and only from the scraper's namespace: it selects a
        rendered Deployment's pods; each endpoint's port is a named port of their container; no
        Service targets that port, and the NetworkPolicies admit it from the namespace labelled
        METRICS_SCRAPER only (never from anywhere, as the gateway's public port is)."""
        selector = monitor["spec"]["selector"]
        pods = [
            d["spec"]["template"]
            for d in by_kind.get("Deployment", [])
            if selects(selector, d["spec"]["template"]["metadata"].get("labels") or {})
        ]
        if not pods:
            self.fail(overlay, monitor, "selects no rendered Deployment's pods")
            return
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            name = endpoint.get("port")
            for pod in pods:
                labels = pod["metadata"].get("labels") or {}
                numbers = [
                    p["containerPort"]
                    for c in pod["spec"]["containers"]
                    for p in c.get("ports") or []
                    if p.get("name") == name
                ]
                if not numbers:
                    problem = f"port {name!r} is not a named port of the pods it selects"
                    self.fail(overlay, monitor, problem)
                    continue
                for service in by_kind.get("Service", []):
                    spec = service["spec"]
                    targets = [p.get("targetPort", p["port"]) for p in spec.get("ports") or []]
                    if selects({"matchLabels": spec.get("selector")}, labels) and (
                        name in targets or numbers[0] in targets
                    ):
                        self.fail(
                            overlay,
                            monitor,
                            f"port {name!r} is exposed by Service/{service['metadata']['name']}: "
                            f"metrics stay off the Services",
                        )
                self.check_scrape_admitted(overlay, monitor, labels, numbers[0], by_kind)

    def check_scrape_admitted(self, overlay, monitor, labels, port, by_kind):
        admitted = False
        for policy in by_kind.get("NetworkPolicy", []):
            pod_selector = policy["spec"].get("podSelector")
            if pod_selector != {} and not selects(pod_selector, labels):
                continue
            for rule in policy["spec"].get("ingress") or []:
                ports = [p.get("port") for p in rule.get("ports") or []]
                if ports and port not in ports:
                    continue
                peers = rule.get("from") or []
                scraper = peers and all(
                    ((peer.get("namespaceSelector") or {}).get("matchLabels") or {}).get(
                        METRICS_SCRAPER
                    )
                    == "true"
                    for peer in peers
                )
                if not scraper:
                    self.fail(
                        overlay,
                        monitor,
                        f"NetworkPolicy/{policy['metadata']['name']} admits metrics port {port} "
                        f"from more than the {METRICS_SCRAPER} namespace",
                    )
                else:
                    admitted = True
        if not admitted:
            self.fail(
                overlay,
                monitor,
                f"no NetworkPolicy admits metrics port {port} from the {METRICS_SCRAPER} namespace",
            )

    def check_env(self, overlay, obj, pod_spec):
        for container in pod_spec.get("containers", []) + pod_spec.get("initContainers", []):
            for env in container.get("env", []) or []:
                if CREDENTIAL_URL.search(str(env.get("value", ""))):
                    self.fail(
                        overlay,
                        obj,
                        f"container {container['name']}: env {env['name']} inlines a URL with "
                        f"credentials; take it from a Secret (valueFrom.secretKeyRef)",
                    )

    def check_pod(self, overlay, obj, pod_spec, probes):
        pod_sc = pod_spec.get("securityContext") or {}
        if pod_sc.get("runAsNonRoot") is not True:
            self.fail(overlay, obj, "pod securityContext.runAsNonRoot must be true")
        if pod_spec.get("automountServiceAccountToken") is not False:
            self.fail(overlay, obj, "automountServiceAccountToken must be false")
        if "terminationGracePeriodSeconds" not in pod_spec and probes:
            self.fail(overlay, obj, "terminationGracePeriodSeconds must match the drain")
        grace_ms = pod_spec.get("terminationGracePeriodSeconds", 30) * 1000
        for container in pod_spec.get("containers", []) + pod_spec.get("initContainers", []):
            where = f"container {container['name']}"
            sc = container.get("securityContext") or {}
            if sc.get("allowPrivilegeEscalation") is not False:
                self.fail(overlay, obj, f"{where}: allowPrivilegeEscalation must be false")
            if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
                self.fail(overlay, obj, f"{where}: capabilities must drop ALL")
            if sc.get("readOnlyRootFilesystem") is not True:
                self.fail(overlay, obj, f"{where}: readOnlyRootFilesystem must be true")
            resources = container.get("resources") or {}
            for part in ("requests", "limits"):
                if not resources.get(part):
                    self.fail(overlay, obj, f"{where}: resources.{part} must be set")
            env = {e["name"]: e.get("value") for e in container.get("env", []) or []}
            drain = env.get("ROVER_HTTP__SHUTDOWN_GRACE_MS")
            if drain is not None:
                pre_stop = (container.get("lifecycle") or {}).get("preStop") or {}
                sleep_ms = ((pre_stop.get("sleep") or {}).get("seconds") or 0) * 1000
                if not str(drain).isdigit() or int(drain) + sleep_ms > grace_ms:
                    self.fail(
                        overlay,
                        obj,
                        f"{where}: terminationGracePeriodSeconds ({grace_ms // 1000}) must cover "
                        f"preStop ({sleep_ms // 1000} s) + ROVER_HTTP__SHUTDOWN_GRACE_MS ({drain})",
                    )
            if probes:
                for probe in ("readinessProbe", "livenessProbe"):
                    if probe not in container:
                        self.fail(overlay, obj, f"{where}: {probe} must be set")


def selects(selector, labels):
    if not selector:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k8s-version", required=True)
    parser.add_argument("--schemas", required=True)
    parser.add_argument("rendered", nargs="+", metavar="NAME=FILE")
    args = parser.parse_args()

    checker = Checker(args.k8s_version, args.schemas)
    counts = {}
    for item in args.rendered:
        overlay, _, file = item.partition("=")
        try:
            objects = [o for o in yaml.safe_load_all(Path(file).read_text()) if o is not None]
        except yaml.YAMLError as error:
            checker.problems.append(f"FAIL {overlay}: the rendered YAML does not parse: {error}")
            continue
        if not objects:
            checker.problems.append(f"FAIL {overlay}: renders no objects")
        before = len(checker.problems)
        for obj in objects:
            checker.validate_schema(overlay, obj)
        # The rules read fields the schemas guarantee, so they run on schema-valid overlays only.
        if len(checker.problems) == before:
            checker.check_rules(overlay, objects)
        counts[overlay] = len(objects)

    for problem in checker.problems:
        print(problem)
    for overlay, count in counts.items():
        failed = sum(1 for p in checker.problems if p.startswith(f"FAIL {overlay}:"))
        state = "ok" if failed == 0 else f"{failed} problem(s)"
        print(
            f"deploy-check: {overlay}: {count} objects, Kubernetes {args.k8s_version} schemas "
            f"(strict) + deploy/schemas: {state}"
        )
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())

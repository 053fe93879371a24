"""The database connection budget of a rendered overlay: `deploy/check.sh` runs it on every one.

Every pod of a service opens up to its pool size of connections to Postgres
(ROVER_DATABASE__MAX_CONNECTIONS, set explicitly on each Deployment that has ROVER_DATABASE__URL),
and a service runs up to its autoscaler's maximum (HorizontalPodAutoscaler maxReplicas, KEDA
ScaledObject maxReplicaCount — KEDA's default is 100 — else the Deployment's replicas) plus the
rolling update's maxSurge. All of that, plus the connections kept for migrations and operators and
the server's superuser_reserved_connections, must fit in the server's max_connections:

    sum(pool x (max replicas + surge)) + reserved + superuser reserved <= max_connections

The server's numbers are the ConfigMap `rover-postgres-budget` (max_connections,
reserved_connections, superuser_reserved_connections). When the overlay runs Postgres itself (a
container of a `postgres` image), its `-c max_connections=` (Postgres's default: 100) must be the
ConfigMap's number, so the budget is checked against the server that really runs.

Usage: connections.py NAME=RENDERED.yaml [NAME=RENDERED.yaml ...]
Prints one line per overlay; exit status 1 when any overlay does not fit or cannot be read.
"""

import math
import re
import sys
from pathlib import Path

import yaml

BUDGET = "rover-postgres-budget"
POOL = "ROVER_DATABASE__MAX_CONNECTIONS"
DB_URL = "ROVER_DATABASE__URL"
POSTGRES_DEFAULT_MAX_CONNECTIONS = 100
POSTGRES_DEFAULT_SUPERUSER_RESERVED = 3


class Unreadable(Exception):
    """The overlay does not say a number the budget needs."""


def integer(value, what):
    try:
        number = int(str(value).strip())
    except ValueError:
        raise Unreadable(f"{what} is {value!r}, not a whole number") from None
    if number < 0:
        raise Unreadable(f"{what} is {number}, below zero")
    return number


def name_of(obj):
    return (obj.get("metadata") or {}).get("name", "?")


def config_map(objects, name):
    for obj in objects:
        if obj.get("kind") == "ConfigMap" and name_of(obj) == name:
            return obj.get("data") or {}
    return None


def container_env(objects, container, key):
    """A variable as the container sees it: its own env beats envFrom (the later source wins)."""
    for env in container.get("env") or []:
        if env.get("name") == key:
            if "value" not in env:
                raise Unreadable(f"container {container['name']}: {key} must be a literal value")
            return env["value"]
    found = None
    for source in container.get("envFrom") or []:
        ref = source.get("configMapRef")
        if ref:
            data = config_map(objects, ref["name"]) or {}
            if key in data:
                found = data[key]
    return found


def uses_database(container):
    return any(env.get("name") == DB_URL for env in container.get("env") or [])


def max_pods(objects, deployment):
    """The most pods the Deployment runs: its autoscaler's maximum, plus the rollout's surge."""
    name = name_of(deployment)
    spec = deployment["spec"]
    most, source = spec.get("replicas", 1), "replicas"
    for obj in objects:
        target = (obj.get("spec") or {}).get("scaleTargetRef") or {}
        if target.get("name") != name or target.get("kind", "Deployment") != "Deployment":
            continue
        if obj.get("kind") == "HorizontalPodAutoscaler":
            most, source = obj["spec"]["maxReplicas"], f"HorizontalPodAutoscaler/{name_of(obj)}"
        elif obj.get("kind") == "ScaledObject":
            most = obj["spec"].get("maxReplicaCount", 100)
            source = f"ScaledObject/{name_of(obj)}"
    strategy = spec.get("strategy") or {}
    surge = 0
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        value = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
        if isinstance(value, str) and value.endswith("%"):
            surge = math.ceil(most * integer(value[:-1], f"{name} maxSurge") / 100)
        else:
            surge = integer(value, f"{name} maxSurge")
    return most, surge, source


def postgres_max_connections(container):
    """`-c max_connections=N` (or `--max_connections=N`) of a Postgres container, else the default."""
    words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
    found = POSTGRES_DEFAULT_MAX_CONNECTIONS
    for word in words:
        match = re.fullmatch(r"(?:--)?max[_-]connections=(\d+)", word)
        if match:
            found = int(match.group(1))
    return found


def budget(overlay, objects):
    data = config_map(objects, BUDGET)
    if data is None:
        raise Unreadable(
            f"no ConfigMap/{BUDGET} (max_connections, reserved_connections, "
            f"superuser_reserved_connections of the overlay's Postgres)"
        )
    limit = integer(data.get("max_connections"), f"ConfigMap/{BUDGET} max_connections")
    reserved = integer(
        data.get("reserved_connections"), f"ConfigMap/{BUDGET} reserved_connections"
    )
    superuser = integer(
        data.get("superuser_reserved_connections", POSTGRES_DEFAULT_SUPERUSER_RESERVED),
        f"ConfigMap/{BUDGET} superuser_reserved_connections",
    )
    problems = []
    services = []
    for obj in objects:
        if obj.get("kind") != "Deployment":
            continue
        for container in obj["spec"]["template"]["spec"].get("containers") or []:
            image = str(container.get("image", ""))
            if re.match(r"^(.*/)?postgres(:|@|$)", image):
                runs = postgres_max_connections(container)
                if runs != limit:
                    problems.append(
                        f"Deployment/{name_of(obj)} runs Postgres with max_connections={runs}, "
                        f"but ConfigMap/{BUDGET} says {limit}: make them agree"
                    )
            if not uses_database(container):
                continue
            pool = container_env(objects, container, POOL)
            if pool is None:
                problems.append(
                    f"Deployment/{name_of(obj)} container {container['name']} connects to the "
                    f"database without {POOL}: set it (the pool size per pod) explicitly"
                )
                continue
            pool = integer(pool, f"Deployment/{name_of(obj)} {POOL}")
            most, surge, source = max_pods(objects, obj)
            services.append((name_of(obj), pool, most, surge, source))
    return limit, reserved, superuser, services, problems


def check(overlay, objects):
    """(ok, line) for one overlay."""
    try:
        limit, reserved, superuser, services, problems = budget(overlay, objects)
    except Unreadable as error:
        return False, f"FAIL {overlay}: database connections: {error}"
    if problems:
        return False, "\n".join(f"FAIL {overlay}: database connections: {p}" for p in problems)
    used = sum(pool * (most + surge) for _, pool, most, surge, _ in services)
    total = used + reserved + superuser
    terms = " + ".join(
        f"{name} {pool} x ({most} max + {surge} surge)" for name, pool, most, surge, _ in services
    )
    sums = (
        f"{terms} = {used} pooled, + {reserved} reserved for migrations and operators "
        f"+ {superuser} superuser-reserved = {total}"
    )
    if total <= limit:
        return True, (
            f"deploy-check: {overlay}: database connections fit: {sums} <= max_connections "
            f"{limit} ({limit - total} spare)"
        )
    return False, (
        f"FAIL {overlay}: database connections do not fit: {sums} > max_connections {limit} "
        f"(ConfigMap/{BUDGET}), {total - limit} over. Lower {POOL} or the maximum replicas "
        f"({', '.join(source for *_, source in services)}), raise the server's max_connections, "
        f"or put a transaction pooler in front of Postgres (deploy/README.md, *Database "
        f"connections*)"
    )


def main(args):
    status = 0
    for item in args:
        overlay, _, file = item.partition("=")
        objects = [o for o in yaml.safe_load_all(Path(file).read_text()) if isinstance(o, dict)]
        ok, line = check(overlay, objects)
        print(line)
        status |= 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Extracts the Prometheus rule groups of every PrometheusRule in rendered manifests into one
Prometheus rule file, so `promtool check rules` and `promtool test rules` check exactly what the
cluster gets (deploy/check.sh; `make observe` loads the same file).

Usage: rules.py RENDERED.yaml OUT.yaml
"""

import sys

import yaml


def main(rendered, out):
    groups = []
    with open(rendered, encoding="utf-8") as stream:
        for obj in yaml.safe_load_all(stream):
            if isinstance(obj, dict) and obj.get("kind") == "PrometheusRule":
                groups.extend((obj.get("spec") or {}).get("groups") or [])
    if not groups:
        print(f"deploy-check: no PrometheusRule groups in {rendered}", file=sys.stderr)
        return 1
    with open(out, "w", encoding="utf-8") as stream:
        yaml.safe_dump({"groups": groups}, stream, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

"""Checks what promtool cannot: that every alert of an overlay's rendered rules is unit-tested both
ways and has its runbook section (deploy/check.sh runs it after `promtool test rules`).

  - the promtool test file has, for every alert, at least one `alert_rule_test` that expects it
    to fire and one that expects it quiet (a test file that only ever expects silence passes
    promtool against a rule that can never fire);
  - every alert's `runbook` annotation is `docs/runbook.md#<anchor>`, and the runbook has a
    `## <AlertName>` section with that anchor saying what it means, the first look and what to
    do, and a row in its thresholds table.

Usage: alerts.py RULES.yaml TESTS.yaml RUNBOOK.md
Exit status: 0 when every alert passes, 1 otherwise (each problem printed on its own line).
"""

import re
import sys

import yaml

PARTS = ("**What it means.**", "**First look.**", "**What to do.**")


def alerts_of(rules_file):
    with open(rules_file, encoding="utf-8") as stream:
        groups = (yaml.safe_load(stream) or {}).get("groups") or []
    return [rule for group in groups for rule in group.get("rules") or [] if "alert" in rule]


def cases_of(tests_file):
    """(alert name, expects it to fire) for every alert_rule_test in the file."""
    with open(tests_file, encoding="utf-8") as stream:
        tests = (yaml.safe_load(stream) or {}).get("tests") or []
    return [
        (case.get("alertname"), bool(case.get("exp_alerts")))
        for test in tests
        for case in test.get("alert_rule_test") or []
    ]


def sections_of(runbook):
    """The runbook's `## ` sections, by heading, with their text."""
    sections = {}
    for chunk in re.split(r"^## ", runbook, flags=re.MULTILINE)[1:]:
        heading, _, body = chunk.partition("\n")
        sections[heading.strip()] = body
    return sections


def anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def problems_of(rules_file, tests_file, runbook_file):
    with open(runbook_file, encoding="utf-8") as stream:
        runbook = stream.read()
    sections = sections_of(runbook)
    thresholds = sections.get("Thresholds", "")
    cases = cases_of(tests_file)
    problems = []
    for rule in alerts_of(rules_file):
        name = rule["alert"]
        expected = {fires for alert, fires in cases if alert == name}
        if True not in expected:
            problems.append(f"{name}: no unit test in {tests_file} expects it to fire")
        if False not in expected:
            problems.append(f"{name}: no unit test in {tests_file} expects it quiet")
        link = (rule.get("annotations") or {}).get("runbook", "")
        if link != f"docs/runbook.md#{anchor(name)}":
            problems.append(
                f"{name}: its runbook annotation is {link!r}, not docs/runbook.md#{anchor(name)}"
            )
        section = sections.get(name)
        if section is None:
            problems.append(f"{name}: docs/runbook.md has no '## {name}' section")
        else:
            for part in PARTS:
                if part not in section:
                    problems.append(f"{name}: its runbook section lacks {part}")
        if f"| {name} |" not in thresholds:
            problems.append(f"{name}: no row in docs/runbook.md's Thresholds table")
    return problems


def main(rules_file, tests_file, runbook_file):
    problems = problems_of(rules_file, tests_file, runbook_file)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

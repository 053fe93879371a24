//! A rules file is checked when it loads: a broken rule is refused with its name and the
//! problem, never discovered mid-conversation.

use rover_scripted_model::{DEFAULT_RULES, Rules, RulesError};

fn problem(text: &str) -> String {
    match Rules::parse(text) {
        Ok(_) => panic!("expected the rules to be refused:\n{text}"),
        Err(error @ RulesError::Rule { .. }) => error.to_string(),
        Err(other) => panic!("expected a rule error, got {other}"),
    }
}

#[test]
fn a_bad_regex_is_refused_naming_the_rule() {
    let message = problem(
        r#"
        [[rule]]
        name = "fine"
        when = "hello"
        steps = [{ say = "hi" }]

        [[rule]]
        name = "broken-regex"
        when = "record (unclosed"
        steps = [{ say = "never" }]
        "#,
    );
    assert!(
        message.starts_with("rule `broken-regex`: when: bad regex `record (unclosed`"),
        "{message}"
    );
}

#[test]
fn a_bad_regex_inside_each_is_refused_too() {
    let message = problem(
        r#"
        [[rule]]
        name = "marks"
        when = "marks: (.+)"
        steps = [{ call = { tool = "m", args = { marks = { each = "match.1", split = "[", item = "{{item.0}}" } } } }]
        "#,
    );
    assert!(
        message.starts_with("rule `marks`: step 1: call `m`: args.marks (each): split: bad regex"),
        "{message}"
    );
}

#[test]
fn an_unknown_template_root_is_refused_naming_the_rule() {
    let message = problem(
        r#"
        [[rule]]
        name = "typo"
        when = "create (.+)"
        steps = [{ call = { tool = "create_department", args = { name = "{{mtach.1}}" } } }]
        "#,
    );
    assert!(
        message.starts_with("rule `typo`: step 1: call `create_department`: args.name: unknown template root `mtach`"),
        "{message}"
    );
    let in_say = problem(
        r#"
        [[rule]]
        name = "say-typo"
        when = "x"
        steps = [{ say = "Done {{results.0.data}}" }]
        "#,
    );
    assert!(
        in_say.contains("rule `say-typo`: step 1: say: unknown template root `results`"),
        "{in_say}"
    );
}

#[test]
fn a_rule_without_a_name_is_named_by_its_position() {
    let message = problem(
        "[[rule]]\nname = \"a\"\nwhen = \"a\"\nsteps = [{ say = \"a\" }]\n[[rule]]\nwhen = \"b\"\nsteps = [{ call = [] }]\n",
    );
    assert_eq!(message, "rule `#2`: step 1: `call` is empty");
}

#[test]
fn invalid_toml_is_refused_as_a_file_error() {
    let error = Rules::parse("[[rule]\nwhen = ").expect_err("not TOML");
    assert!(matches!(error, RulesError::File(_)), "{error}");
}

#[test]
fn the_default_rules_load_and_end_with_a_catch_all() {
    let rules = Rules::parse(DEFAULT_RULES).expect("the shipped rules.toml is valid");
    let names: Vec<&str> = rules.names().collect();
    assert_eq!(names.last(), Some(&"anything-else"));
    for expected in [
        "create-department",
        "rename-department",
        "attendance-class-teacher",
        "attendance-rover",
        "marks-subject-teacher",
        "assign-director-of-studies",
        "model-failure",
    ] {
        assert!(
            names.contains(&expected),
            "missing rule {expected}: {names:?}"
        );
    }
}

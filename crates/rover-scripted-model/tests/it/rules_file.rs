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

/// The arguments every call of the shipped rules sends are arguments of that tool's contract
/// (`tool-contracts.json`, kept in sync with the contracts by the gateway's tests): a renamed
/// argument cannot linger here and be refused only when a conversation reaches it. Injected
/// fields (`inject`) are meant to be refused, so they are not checked.
#[test]
fn the_default_rules_call_tools_with_their_contracts_arguments() {
    let contracts: serde_json::Value = serde_json::from_str(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tool-contracts.json"
    )))
    .expect("tool-contracts.json parses");
    let schema_of = |tool: &str| {
        contracts
            .as_array()
            .expect("a list of contracts")
            .iter()
            .find(|c| c["name"] == tool)
            .map(|c| c["argsSchema"].clone())
    };
    let rules: toml::Value = toml::from_str(DEFAULT_RULES).expect("rules.toml parses");
    let mut checked = 0;
    for rule in rules["rule"].as_array().expect("rules") {
        let name = rule["name"].as_str().unwrap_or("?");
        for step in rule
            .get("steps")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
        {
            let calls = match step.get("call") {
                Some(toml::Value::Array(calls)) => calls.clone(),
                Some(call) => vec![call.clone()],
                None => continue,
            };
            for call in calls {
                let tool = call["tool"].as_str().expect("a tool");
                let Some(schema) = schema_of(tool) else {
                    continue;
                };
                let args = match call.get("args") {
                    Some(toml::Value::Table(args)) => args.clone(),
                    Some(toml::Value::String(json)) => {
                        let args: toml::Table = serde_json::from_str(json).expect("JSON args");
                        args
                    }
                    _ => toml::Table::new(),
                };
                check_object(&format!("{name}: {tool}"), &args, &schema);
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} calls checked");
}

/// Every key of `args` is a property of `schema`, and every required property is there; an
/// array property's items (written out, or an `each`'s `item`) are checked against its items.
fn check_object(place: &str, args: &toml::Table, schema: &serde_json::Value) {
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (key, value) in args {
        let property = properties
            .get(key)
            .unwrap_or_else(|| panic!("{place}: `{key}` is not an argument of the tool"));
        let items = &property["items"];
        if !items.is_object() {
            continue;
        }
        let elements: Vec<&toml::Value> = match value {
            toml::Value::Array(elements) => elements.iter().collect(),
            toml::Value::Table(each) => each.get("item").into_iter().collect(),
            _ => Vec::new(),
        };
        for element in elements {
            if let toml::Value::Table(element) = element {
                check_object(&format!("{place}: {key}[]"), element, items);
            }
        }
    }
    for required in schema["required"].as_array().into_iter().flatten() {
        let required = required.as_str().unwrap_or_default();
        assert!(
            args.contains_key(required),
            "{place}: the required `{required}` is missing"
        );
    }
}

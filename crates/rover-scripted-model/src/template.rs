//! `{{path}}` templates: parsing them once when the rules load, and rendering them per request.
//!
//! A path starts at a root (`match`, `trigger`, `context`, `result`, `item`, `error`) and walks
//! segments: `.field`, `.3`, `[3]`, `[*]` (map over an array), `[field=ref]` / `[field="text"]`
//! (first element whose field equals, case-insensitive) and `[field~ref]` (first element whose
//! field contains). Filters follow after `|`: `number`, `count`, `json`, `default:"text"`, `uuid`
//! (the first UUID written in a text).

use serde_json::Value;

mod parse;

use parse::Parser;

/// Where a path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Root {
    /// Regex captures of the trigger (`match.0` is the whole match).
    Match,
    /// The whole trigger text.
    Trigger,
    /// The runtime context JSON from the system prompt.
    Context,
    /// The tool results after the trigger, parsed as JSON.
    Result,
    /// Captures of the current part inside `each`.
    Item,
    /// The error text of a failed tool result (only inside `on_error`).
    Error,
}

impl Root {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "match" => Self::Match,
            "trigger" => Self::Trigger,
            "context" => Self::Context,
            "result" => Self::Result,
            "item" => Self::Item,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

/// How a `[field…]` selector compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    Equals,
    Contains,
}

/// What a selector compares against.
#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Literal(String),
    Path(Box<Path>),
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    /// `.name` or `.3`: an object key, or an array index when the key is a number.
    Key(String),
    /// `[3]`.
    Index(usize),
    /// `[*]`.
    Each,
    /// `[a.b=operand]` or `[a.b~operand]`.
    Select {
        field: Vec<String>,
        compare: Compare,
        operand: Operand,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Filter {
    Number,
    Count,
    Json,
    Default(String),
    Uuid,
}

/// A parsed path, kept with its source text for messages.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Path {
    source: String,
    root: Root,
    segments: Vec<Segment>,
    filters: Vec<Filter>,
}

/// A path or template of a rules file that does not parse; the message says where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub(crate) String);

/// The values a path can reach for one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    /// Trigger captures, as JSON strings (or null for groups that did not take part).
    pub(crate) captures: &'a Value,
    /// The trigger text.
    pub(crate) trigger: &'a Value,
    /// The runtime context, or null when the prompt has none.
    pub(crate) context: &'a Value,
    /// The tool results after the trigger.
    pub(crate) results: &'a Value,
    /// The captures of the current `each` part, or null outside `each`.
    pub(crate) item: &'a Value,
    /// The error text inside `on_error`, or null.
    pub(crate) error: &'a Value,
}

impl Scope<'_> {
    fn root(&self, root: Root) -> &Value {
        match root {
            Root::Match => self.captures,
            Root::Trigger => self.trigger,
            Root::Context => self.context,
            Root::Result => self.results,
            Root::Item => self.item,
            Root::Error => self.error,
        }
    }
}

/// A path that resolved to nothing; the engine turns it into a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missing(pub(crate) String);

impl Path {
    /// Parses `match.1`, `result.0.data[name=match.1].id|number`, ….
    pub(crate) fn parse(source: &str) -> Result<Self, SyntaxError> {
        let mut parser = Parser {
            text: source.trim(),
            pos: 0,
        };
        let path = parser.path()?;
        if !parser.at_end() {
            return Err(parser.error("unexpected text"));
        }
        Ok(path)
    }

    /// The root this path starts at.
    pub(crate) fn root(&self) -> Root {
        self.root
    }

    /// The path's text, as written.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Every path inside this one (itself and the operands of its selectors).
    pub(crate) fn walk<'a>(&'a self, out: &mut Vec<&'a Path>) {
        out.push(self);
        for segment in &self.segments {
            if let Segment::Select {
                operand: Operand::Path(path),
                ..
            } = segment
            {
                path.walk(out);
            }
        }
    }

    /// The first segment as a number, when it is one (`match.2` → 2).
    pub(crate) fn first_index(&self) -> Option<usize> {
        match self.segments.first()? {
            Segment::Key(key) => key.parse().ok(),
            Segment::Index(index) => Some(*index),
            _ => None,
        }
    }

    /// Resolves the path; `Missing` when it leads nowhere (a missing field, null, no match).
    pub(crate) fn resolve(&self, scope: &Scope<'_>) -> Result<Value, Missing> {
        let start = scope.root(self.root);
        let mut value = walk(start, &self.segments, scope)
            .filter(|v| !v.is_null())
            .ok_or_else(|| Missing(self.source.clone()));
        for filter in &self.filters {
            value = match (filter, value) {
                (Filter::Default(text), Ok(v)) if is_empty(&v) => Ok(Value::String(text.clone())),
                (Filter::Default(text), Err(_)) => Ok(Value::String(text.clone())),
                (_, Err(missing)) => Err(missing),
                (Filter::Default(_), Ok(v)) => Ok(v),
                (Filter::Number, Ok(v)) => {
                    to_number(&v).ok_or_else(|| Missing(self.source.clone()))
                }
                (Filter::Count, Ok(v)) => match v {
                    Value::Array(items) => Ok(Value::from(items.len())),
                    Value::Object(map) => Ok(Value::from(map.len())),
                    _ => Err(Missing(self.source.clone())),
                },
                (Filter::Json, Ok(v)) => Ok(Value::String(v.to_string())),
                (Filter::Uuid, Ok(v)) => v
                    .as_str()
                    .and_then(first_uuid)
                    .map(Value::String)
                    .ok_or_else(|| Missing(self.source.clone())),
            };
        }
        value
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// Whether a condition holds: `true`, or any value that is not null, false or empty.
pub(crate) fn truthy(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        other => !is_empty(other),
    }
}

/// The first UUID (8-4-4-4-12 hex digits) written in `text`.
fn first_uuid(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(35))
        .map(|start| &bytes[start..start + 36])
        .find(|window| {
            window.iter().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => *b == b'-',
                _ => b.is_ascii_hexdigit(),
            })
        })
        .map(|window| String::from_utf8_lossy(window).to_ascii_lowercase())
}

fn to_number(value: &Value) -> Option<Value> {
    match value {
        Value::Number(_) => Some(value.clone()),
        Value::String(text) => {
            let text = text.trim();
            if let Ok(int) = text.parse::<i64>() {
                return Some(Value::from(int));
            }
            text.parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
        }
        _ => None,
    }
}

fn walk(value: &Value, segments: &[Segment], scope: &Scope<'_>) -> Option<Value> {
    let Some((segment, rest)) = segments.split_first() else {
        return Some(value.clone());
    };
    match segment {
        Segment::Key(key) => {
            let next = match value {
                Value::Object(map) => map.get(key)?,
                Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
                _ => return None,
            };
            walk(next, rest, scope)
        }
        Segment::Index(index) => walk(value.as_array()?.get(*index)?, rest, scope),
        Segment::Each => {
            let items = value.as_array()?;
            Some(Value::Array(
                items
                    .iter()
                    .filter_map(|item| walk(item, rest, scope))
                    .filter(|v| !v.is_null())
                    .collect(),
            ))
        }
        Segment::Select {
            field,
            compare,
            operand,
        } => {
            let wanted = match operand {
                Operand::Literal(text) => text.clone(),
                Operand::Path(path) => text_of(&path.resolve(scope).ok()?),
            }
            .to_lowercase();
            let found = value.as_array()?.iter().find(|item| {
                let Some(have) = field.iter().try_fold(*item, |v, key| v.get(key)) else {
                    return false;
                };
                let have = text_of(have).to_lowercase();
                match compare {
                    Compare::Equals => have == wanted,
                    Compare::Contains => !wanted.is_empty() && have.contains(&wanted),
                }
            })?;
            walk(found, rest, scope)
        }
    }
}

/// A value as text: strings unquoted, arrays joined with ", ", objects as JSON.
pub(crate) fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(_) | Value::Number(_) | Value::Object(_) => value.to_string(),
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join(", "),
    }
}

/// One piece of a template string.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Path(Path),
}

/// A string with `{{path}}` placeholders.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Template {
    pieces: Vec<Piece>,
}

impl Template {
    /// Parses a template string; `{{` must be closed by `}}` and hold a valid path.
    pub(crate) fn parse(text: &str) -> Result<Self, SyntaxError> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| SyntaxError(format!("unclosed `{{{{` in `{text}`")))?;
            pieces.push(Piece::Path(Path::parse(&after[..close])?));
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        Ok(Self { pieces })
    }

    /// Every path in the template, selector operands included.
    pub(crate) fn paths(&self) -> Vec<&Path> {
        let mut out = Vec::new();
        for piece in &self.pieces {
            if let Piece::Path(path) = piece {
                path.walk(&mut out);
            }
        }
        out
    }

    /// Renders as text: values interpolated (strings unquoted, arrays joined with ", ").
    pub(crate) fn render_text(&self, scope: &Scope<'_>) -> Result<String, Missing> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Path(path) => out.push_str(&text_of(&path.resolve(scope)?)),
            }
        }
        Ok(out)
    }

    /// Renders as a JSON value: a template that is exactly one `{{path}}` becomes the value
    /// itself (number, array, object); anything else becomes a string.
    pub(crate) fn render_value(&self, scope: &Scope<'_>) -> Result<Value, Missing> {
        match self.pieces.as_slice() {
            [Piece::Path(path)] => path.resolve(scope),
            _ => self.render_text(scope).map(Value::String),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn scope<'a>(captures: &'a Value, context: &'a Value, results: &'a Value) -> Scope<'a> {
        Scope {
            captures,
            trigger: &Value::Null,
            context,
            results,
            item: &Value::Null,
            error: &Value::Null,
        }
    }

    #[test]
    fn selectors_find_by_equal_and_contained_fields_case_insensitively() {
        let captures = json!(["x", "s1 blue", "naka"]);
        let results = json!([{"data": [
            {"class": {"id": "c2", "name": "S2 Red"}, "students": []},
            {"class": {"id": "c1", "name": "S1 Blue"}, "students": [{"id": "s9", "name": "Nakato Sarah"}]}
        ]}]);
        let s = scope(&captures, &Value::Null, &results);
        let path = Path::parse("result.0.data[class.name=match.1].students[name~match.2].id")
            .expect("parses");
        assert_eq!(path.resolve(&s), Ok(json!("s9")));
        let literal = Path::parse("result.0.data[class.name=\"S2 RED\"].class.id").expect("parses");
        assert_eq!(literal.resolve(&s), Ok(json!("c2")));
        let names = Path::parse("result.0.data[*].class.name").expect("parses");
        assert_eq!(names.resolve(&s), Ok(json!(["S2 Red", "S1 Blue"])));
        let count = Path::parse("result.0.data|count").expect("parses");
        assert_eq!(count.resolve(&s), Ok(json!(2)));
    }

    #[test]
    fn a_whole_placeholder_keeps_its_type_and_mixed_text_interpolates() {
        let captures = json!(["Nakato 78", "78"]);
        let results = json!([{"data": {"names": ["A", "B"]}}]);
        let s = scope(&captures, &Value::Null, &results);
        let number = Template::parse("{{match.1|number}}").expect("parses");
        assert_eq!(number.render_value(&s), Ok(json!(78)));
        let text = Template::parse("Names: {{result.0.data.names}}.").expect("parses");
        assert_eq!(text.render_value(&s), Ok(json!("Names: A, B.")));
        let missing = Template::parse("{{result.0.data.nothing}}").expect("parses");
        assert_eq!(
            missing.render_value(&s),
            Err(Missing("result.0.data.nothing".into()))
        );
        let fallback = Template::parse("{{result.0.data.nothing|default:\"none\"}}").expect("ok");
        assert_eq!(fallback.render_text(&s), Ok("none".to_owned()));
    }

    #[test]
    fn uuid_picks_the_first_uuid_written_in_a_text() {
        let captures = json!([
            "x",
            "Note: use class 6B3F0E3E-4a5b-4c1d-9e2f-1a2b3c4d5e6f, then 00000000-0000-0000-0000-000000000000",
            "no id here"
        ]);
        let s = scope(&captures, &Value::Null, &Value::Null);
        let id = Path::parse("match.1|uuid").expect("parses");
        assert_eq!(
            id.resolve(&s),
            Ok(json!("6b3f0e3e-4a5b-4c1d-9e2f-1a2b3c4d5e6f"))
        );
        let none = Path::parse("match.2|uuid").expect("parses");
        assert!(none.resolve(&s).is_err());
    }

    #[test]
    fn bad_paths_say_what_is_wrong() {
        let unknown = Path::parse("bogus.1").expect_err("unknown root");
        assert!(
            unknown.0.contains("unknown template root `bogus`"),
            "{unknown}"
        );
        let unclosed = Template::parse("Hi {{match.1").expect_err("unclosed");
        assert!(unclosed.0.contains("unclosed"), "{unclosed}");
        let filter = Path::parse("match.1|shout").expect_err("unknown filter");
        assert!(filter.0.contains("unknown filter `shout`"), "{filter}");
    }
}

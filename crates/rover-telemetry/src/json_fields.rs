//! A span's fields in the JSON log lines: written as `tracing-subscriber`'s `JsonFields` writes
//! them, but a field recorded on a span after it opened is appended to the span's JSON object
//! instead of the whole object being parsed and written again.
//!
//! `JsonFields` parses and re-serialises a span's fields on every `Span::record` (its own comment
//! calls it "far from efficient"), and Rover's spans record as they go — the tool, the outcome,
//! the permission rule — several times per tool call: in the tool server at load that was 6% of
//! its CPU. Appending leaves a key twice when a field is recorded twice; the JSON formatter reads
//! the object back into a map when it writes an event's `span`, where the later value wins — as
//! with `JsonFields`. The log lines are the same.

use std::fmt;

use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::FormattedFields;
use tracing_subscriber::fmt::format::{JsonFields, Writer};

/// The JSON logs' span-field formatter (see the module's documentation).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AppendingJsonFields;

impl<'writer> FormatFields<'writer> for AppendingJsonFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        JsonFields::new().format_fields(writer, fields)
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut added = String::new();
        JsonFields::new().format_fields(Writer::new(&mut added), fields)?;
        append(&mut current.fields, &added);
        Ok(())
    }
}

/// Appends the members of the JSON object `added` to the JSON object `object` (either may be
/// empty text or `{}`).
fn append(object: &mut String, added: &str) {
    let Some(new) = added
        .strip_prefix('{')
        .and_then(|rest| rest.strip_suffix('}'))
        .filter(|new| !new.is_empty())
    else {
        return;
    };
    if object.len() > 2 && object.ends_with('}') {
        object.pop();
        object.push(',');
        object.push_str(new);
        object.push('}');
    } else {
        object.clear();
        object.push_str(added);
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::{AppendingJsonFields, append};

    #[test]
    fn members_are_appended_to_an_object_and_nothing_is_lost() {
        let mut object = String::new();
        append(&mut object, "{}");
        assert_eq!(object, "");
        append(&mut object, r#"{"a":1}"#);
        assert_eq!(object, r#"{"a":1}"#);
        append(&mut object, "{}");
        assert_eq!(object, r#"{"a":1}"#);
        append(&mut object, r#"{"b":"x}","c":true}"#);
        assert_eq!(object, r#"{"a":1,"b":"x}","c":true}"#);
        let mut empty = "{}".to_owned();
        append(&mut empty, r#"{"d":null}"#);
        assert_eq!(empty, r#"{"d":null}"#);
    }

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The `span` object of the one JSON line an event inside a span that recorded as it went
    /// logs, through the JSON layer as the services configure it.
    fn logged_span() -> Value {
        let lines = Lines::default();
        let writer = lines.clone();
        let layer = tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .fmt_fields(AppendingJsonFields)
            .with_writer(move || writer.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                "call",
                id = "c-1",
                tool = tracing::field::Empty,
                outcome = tracing::field::Empty,
                note = tracing::field::Empty,
            );
            span.record("tool", "list_departments");
            span.record("outcome", "denied");
            span.record("note", "quote \" and brace }");
            span.record("outcome", "ok");
            tracing::info!(parent: &span, "done");
        });
        let bytes = lines
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let line: Value = serde_json::from_slice(&bytes).expect("one JSON line");
        line["span"].clone()
    }

    #[test]
    fn a_span_that_records_as_it_goes_logs_every_field_once_with_its_last_value() {
        assert_eq!(
            logged_span(),
            json!({
                "name": "call",
                "id": "c-1",
                "tool": "list_departments",
                "outcome": "ok",
                "note": "quote \" and brace }",
            })
        );
    }
}

//! A span's fields in the JSON log lines, as `tracing-subscriber`'s `JsonFields` writes them, at a
//! fraction of the cost:
//!
//! - **Written straight out.** `JsonFields` collects a span's fields into a map of
//!   `serde_json::Value`s, each value a `String` of its own, then serialises the map. Every span
//!   is formatted as it opens, whether or not a line is ever logged inside it — in the tool
//!   server, four spans per read that logs nothing. Here each field is escaped straight into the
//!   span's text as it is visited: no map, no value, one allocation (the text).
//! - **Appended.** A field recorded on a span after it opened is written into the span's JSON
//!   object in place, over its closing brace, instead of the whole object being parsed and written
//!   again (`JsonFields` does that on every `Span::record`, "far from efficient" in its own words;
//!   in the tool server at load that was 6% of its CPU). A key recorded twice is then in the text twice; the JSON formatter reads
//!   the object back into a map when it writes an event's `span`, where the later value wins — as
//!   with `JsonFields`.
//!
//! The log lines are the same as `JsonFields`' (the tests compare them): strings and `Debug`
//! values as JSON strings escaped as `serde_json` escapes them, numbers and booleans as JSON,
//! a non-finite float as `null`, bytes as an array of numbers, `r#` dropped from a raw name, and
//! `log.` fields (a `log` record's metadata, logged by the formatter itself) skipped.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::FormattedFields;
use tracing_subscriber::fmt::format::Writer;

/// The JSON logs' span-field formatter (see the module's documentation).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AppendingJsonFields;

impl<'writer> FormatFields<'writer> for AppendingJsonFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        // The span's text is written whole into `writer` (a new span's empty `String`), so it is
        // allocated once at its size instead of grown from nothing field by field; the fields are
        // written first into this thread's scratch text, whose room is kept from span to span.
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut text) => {
                text.clear();
                write_object(&mut *text, fields)?;
                writer.write_str(&text)
            }
            // A field's `Debug` opened a span while this one was being written: no scratch.
            Err(_) => write_object(&mut writer, fields),
        })
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let object = &mut current.fields;
        if object.len() > 2 && object.ends_with('}') {
            // Members of their own: written over the closing brace, which then closes them too.
            object.pop();
            let mut members = JsonObject {
                out: &mut *object,
                first: false,
                result: Ok(()),
            };
            fields.record(&mut members);
            let written = members.result;
            object.push('}');
            written
        } else {
            object.clear();
            write_object(object, fields)
        }
    }
}

thread_local! {
    /// Where [`AppendingJsonFields`] writes a new span's fields before they are copied once into
    /// the span's text.
    static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// `fields` as one JSON object onto `out`.
fn write_object(out: &mut impl fmt::Write, fields: impl RecordFields) -> fmt::Result {
    let mut object = JsonObject {
        out,
        first: true,
        result: Ok(()),
    };
    fields.record(&mut object);
    object.finish()
}

/// A JSON object written member by member as a span's fields are visited.
struct JsonObject<'a, W: fmt::Write> {
    out: &'a mut W,
    first: bool,
    /// The first write that failed; later fields are not written.
    result: fmt::Result,
}

impl<W: fmt::Write> JsonObject<'_, W> {
    /// Writes `"name":` and then the value `write` writes, unless a write failed before.
    fn member(&mut self, name: &str, write: impl FnOnce(&mut W) -> fmt::Result) {
        if self.result.is_err() {
            return;
        }
        let separator = if self.first { "{" } else { "," };
        self.first = false;
        self.result = self
            .out
            .write_str(separator)
            .and_then(|()| write_string(self.out, name))
            .and_then(|()| self.out.write_char(':'))
            .and_then(|()| write(self.out));
    }

    fn finish(self) -> fmt::Result {
        self.result?;
        self.out.write_str(if self.first { "{}" } else { "}" })
    }
}

impl<W: fmt::Write> Visit for JsonObject<'_, W> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        // `serde_json`'s number: shortest round-trip digits; `null` when not finite.
        self.member(field.name(), |out| {
            write!(out, "{}", serde_json::Value::from(value))
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.member(field.name(), |out| write!(out, "{value}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.member(field.name(), |out| write!(out, "{value}"));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.member(field.name(), |out| write!(out, "{value}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.member(field.name(), |out| write_string(out, value));
    }

    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        self.member(field.name(), |out| {
            out.write_char('[')?;
            for (i, byte) in value.iter().enumerate() {
                if i > 0 {
                    out.write_char(',')?;
                }
                write!(out, "{byte}")?;
            }
            out.write_char(']')
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        if name.starts_with("log.") {
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.member(name, |out| {
            out.write_char('"')?;
            write!(Escaping(out), "{value:?}")?;
            out.write_char('"')
        });
    }
}

/// `text` as a JSON string.
fn write_string(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    out.write_char('"')?;
    Escaping(out).write_str(text)?;
    out.write_char('"')
}

/// Whether `byte` is escaped inside a JSON string.
const fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Writes what it is given escaped for the inside of a JSON string, as `serde_json` escapes it:
/// `"`, `\\` and the control characters below U+0020, nothing else.
struct Escaping<'a, W: fmt::Write>(&'a mut W);

impl<W: fmt::Write> fmt::Write for Escaping<'_, W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        // Most text needs no escape at all: one pass to find out (without stopping early, so the
        // compiler checks many bytes at a time), then one write.
        if !text
            .bytes()
            .fold(false, |any, byte| any | needs_escape(byte))
        {
            return self.0.write_str(text);
        }
        let mut plain = 0;
        for (at, byte) in text.bytes().enumerate() {
            let escape = match byte {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0x08 => "\\b",
                0x0c => "\\f",
                0x00..=0x1f => "",
                _ => continue,
            };
            self.0.write_str(&text[plain..at])?;
            if escape.is_empty() {
                write!(self.0, "\\u{byte:04x}")?;
            } else {
                self.0.write_str(escape)?;
            }
            plain = at + 1;
        }
        self.0.write_str(&text[plain..])
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};
    use tracing_subscriber::layer::SubscriberExt as _;

    use tracing_subscriber::fmt::FormatFields;
    use tracing_subscriber::fmt::format::JsonFields;

    use super::AppendingJsonFields;

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

    /// The JSON lines `log` logs through the JSON layer as the services configure it, with
    /// `fields` formatting the spans' fields.
    fn logged_lines<N>(fields: N, log: impl FnOnce()) -> Vec<Value>
    where
        N: for<'w> FormatFields<'w> + Send + Sync + 'static,
    {
        let lines = Lines::default();
        let writer = lines.clone();
        let layer = tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .without_time()
            .fmt_fields(fields)
            .with_writer(move || writer.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, log);
        let bytes = lines
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        serde_json::Deserializer::from_slice(&bytes)
            .into_iter::<Value>()
            .map(|line| line.expect("JSON lines"))
            .collect()
    }

    /// The one JSON line `log` logs (see [`logged_lines`]).
    fn logged_line<N>(fields: N, log: impl FnOnce()) -> Value
    where
        N: for<'w> FormatFields<'w> + Send + Sync + 'static,
    {
        let mut lines = logged_lines(fields, log);
        assert_eq!(lines.len(), 1, "one line: {lines:?}");
        lines.remove(0)
    }

    /// The `span` object of the one JSON line an event inside a span that recorded as it went
    /// logs.
    fn logged_span() -> Value {
        let line = logged_line(AppendingJsonFields, || {
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
        line["span"].clone()
    }

    /// A span with a field of every kind the formatter writes, some recorded after it opened, and
    /// an event inside it.
    fn every_kind_of_field() {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Call {
            id: &'static str,
            note: &'static str,
        }
        let r#type = "raw name";
        let span = tracing::info_span!(
            "call",
            text = "tab\t newline\n quote\" backslash\\ bell\u{7} nul\u{0} é ✓ 🦀",
            number = -42_i64,
            count = 7_u64,
            wide = 1_u128 << 100,
            yes = true,
            ratio = 0.1_f64,
            whole = 3.0_f64,
            not_a_number = f64::NAN,
            infinite = f64::INFINITY,
            debug = ?Call { id: "c-1", note: "line\nbreak \u{1f}" },
            display = %"shown } as { text",
            bytes = tracing::field::debug(&[0_u8, 255]),
            r#type,
            later = tracing::field::Empty,
        );
        span.record("later", "recorded \"after\"");
        span.record("yes", false);
        let error = std::io::Error::other("disk \"full\"");
        tracing::info!(
            parent: &span,
            error = &error as &dyn std::error::Error,
            "done"
        );
    }

    #[test]
    fn every_kind_of_field_is_logged_as_json_fields_logs_it() {
        let ours = logged_line(AppendingJsonFields, every_kind_of_field);
        let theirs = logged_line(JsonFields::new(), every_kind_of_field);
        assert_eq!(ours, theirs);
        assert_eq!(ours["span"]["later"], "recorded \"after\"");
        assert_eq!(ours["span"]["yes"], false);
        assert_eq!(ours["span"]["type"], "raw name");
        assert_eq!(ours["span"]["not_a_number"], Value::Null);
    }

    /// A span with no fields and one with bytes, an event in each.
    fn no_fields_and_bytes() {
        let empty = tracing::info_span!("empty");
        tracing::info!(parent: &empty, "in the empty span");
        let bytes: &[u8] = &[0, 1, 255];
        let with_bytes = tracing::info_span!("bytes", payload = bytes);
        tracing::info!(parent: &with_bytes, "in the bytes span");
    }

    #[test]
    fn a_span_with_no_fields_and_one_with_bytes_are_logged_as_json_fields_logs_them() {
        let ours = logged_lines(AppendingJsonFields, no_fields_and_bytes);
        let theirs = logged_lines(JsonFields::new(), no_fields_and_bytes);
        assert_eq!(ours, theirs);
        assert_eq!(ours[0]["span"], json!({"name": "empty"}));
        assert_eq!(
            ours[1]["span"],
            json!({"name": "bytes", "payload": [0, 1, 255]})
        );
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

    /// A span whose fields all come after it opens, and one whose field's `Debug` opens a span
    /// while the span is being written (so the scratch text is in use), an event in each.
    fn fields_recorded_later_and_a_span_opened_while_writing() {
        struct Opens;
        impl std::fmt::Debug for Opens {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let _inner = tracing::info_span!("inner", c = "y");
                f.write_str("opened")
            }
        }
        let later = tracing::info_span!(
            "later",
            a = tracing::field::Empty,
            b = tracing::field::Empty
        );
        later.record("a", 1_i64);
        later.record("b", "x}");
        tracing::info!(parent: &later, "in the later span");
        let outer = tracing::info_span!("outer", d = ?Opens, e = "z");
        tracing::info!(parent: &outer, "in the outer span");
    }

    #[test]
    fn fields_recorded_later_and_a_span_opened_while_writing_are_logged_as_json_fields_logs_them() {
        let ours = logged_lines(
            AppendingJsonFields,
            fields_recorded_later_and_a_span_opened_while_writing,
        );
        let theirs = logged_lines(
            JsonFields::new(),
            fields_recorded_later_and_a_span_opened_while_writing,
        );
        assert_eq!(ours, theirs);
        assert_eq!(ours[0]["span"], json!({"name": "later", "a": 1, "b": "x}"}));
        assert_eq!(
            ours[1]["span"],
            json!({"name": "outer", "d": "opened", "e": "z"})
        );
    }
}

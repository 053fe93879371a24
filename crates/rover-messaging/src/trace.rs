//! W3C trace context (`traceparent`, `tracestate`) in AMQP headers, and the conversion between
//! AMQP header tables and plain string maps.

use std::collections::HashMap;

use lapin::types::{AMQPValue, FieldTable, LongString};
use opentelemetry::{
    Context,
    propagation::{Extractor, Injector, TextMapPropagator},
};
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// Message headers as strings. Both [`Injector`] and [`Extractor`] are implemented for it, so
/// it works with [`inject`] and [`extract`] directly.
pub type Headers = HashMap<String, String>;

/// Writes `context`'s span as `traceparent`/`tracestate` into `carrier`.
///
/// Uses the W3C propagator directly rather than the global one, so propagation works whether
/// or not a service installed a global propagator. Writes nothing if `context` has no valid
/// span (for example when no OpenTelemetry layer is installed).
pub fn inject(context: &Context, carrier: &mut dyn Injector) {
    TraceContextPropagator::new().inject_context(context, carrier);
}

/// Reads `traceparent`/`tracestate` from `carrier` into a context whose remote span can be
/// used as a parent. Returns an empty context if the headers carry none.
pub fn extract(carrier: &dyn Extractor) -> Context {
    TraceContextPropagator::new().extract_with_context(&Context::new(), carrier)
}

/// Turns string headers into an AMQP header table (every value a long string).
pub(crate) fn to_field_table(headers: &Headers) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in headers {
        if let Ok(key) = lapin::types::ShortString::try_new(key.as_str()) {
            table.insert(key, AMQPValue::LongString(LongString::from(value.as_str())));
        }
    }
    table
}

/// Turns an AMQP header table into string headers. Strings, numbers and booleans are kept;
/// nested tables and arrays (such as `x-death`) are left out.
pub(crate) fn from_field_table(table: &FieldTable) -> Headers {
    table
        .inner()
        .iter()
        .filter_map(|(key, value)| Some((key.to_string(), scalar_to_string(value)?)))
        .collect()
}

fn scalar_to_string(value: &AMQPValue) -> Option<String> {
    Some(match value {
        AMQPValue::LongString(s) => s.to_string(),
        AMQPValue::ShortString(s) => s.to_string(),
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::Timestamp(t) => t.to_string(),
        AMQPValue::Float(f) => f.to_string(),
        AMQPValue::Double(f) => f.to_string(),
        other => as_i128(other)?.to_string(),
    })
}

/// Reads any AMQP integer as an `i128`, which holds all of them.
pub(crate) fn as_i128(value: &AMQPValue) -> Option<i128> {
    Some(match value {
        AMQPValue::ShortShortInt(v) => (*v).into(),
        AMQPValue::ShortShortUInt(v) => (*v).into(),
        AMQPValue::ShortInt(v) => (*v).into(),
        AMQPValue::ShortUInt(v) => (*v).into(),
        AMQPValue::LongInt(v) => (*v).into(),
        AMQPValue::LongUInt(v) => (*v).into(),
        AMQPValue::LongLongInt(v) => (*v).into(),
        _ => return None,
    })
}

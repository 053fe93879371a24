//! The one result shape every tool returns to the model (seed hop 5).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a tool hands the model: `{"data":…,"scopeContext":"…"}` or `{"error":"…"}`.
///
/// `scopeContext` is a true sentence about how filtered the data is ("across your campus, Kololo"),
/// which the prompt tells the model to qualify its answer with. A denial is an `Error` whose text
/// starts with `Permission denied:` — never an exception, never an HTTP status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged, deny_unknown_fields)]
pub enum AgentToolResult<T> {
    /// The tool succeeded.
    Data {
        /// The tool's output.
        data: T,
        /// How filtered `data` is.
        #[serde(rename = "scopeContext")]
        scope_context: String,
        /// When the staff member changed the call's input as they approved it: a sentence saying
        /// the call ran with their values, and which (the model reads it, and the Hub may show it).
        #[serde(
            rename = "staffEdits",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        staff_edits: Option<String>,
    },
    /// The tool failed; the text is for the model to explain.
    Error {
        /// A plain sentence.
        error: String,
        /// When it failed because it could not tell which thing the staff member meant (a name
        /// that fits two students, or none): the question to ask them, with the candidates as
        /// choices. The worker asks it (as an `ask_user` call) instead of handing it to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ask: Option<Ask>,
    },
}

/// A question for the staff member that a failed call raises: which of these did you mean?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    /// One short question ("Which Nakato do you mean?").
    pub question: String,
    /// The candidates, each as it can be said back unambiguously ("Nakato Sarah (S1 Blue)").
    pub choices: Vec<String>,
}

impl<T> AgentToolResult<T> {
    /// A success.
    pub fn data(data: T, scope_context: impl Into<String>) -> Self {
        Self::Data {
            data,
            scope_context: scope_context.into(),
            staff_edits: None,
        }
    }

    /// A failure.
    pub fn error(error: impl Into<String>) -> Self {
        Self::Error {
            error: error.into(),
            ask: None,
        }
    }

    /// A failure that raises a question for the staff member.
    pub fn error_asking(error: impl Into<String>, ask: Ask) -> Self {
        Self::Error {
            error: error.into(),
            ask: Some(ask),
        }
    }

    /// The question a failure raises, if any.
    pub fn ask(&self) -> Option<&Ask> {
        match self {
            Self::Error { ask, .. } => ask.as_ref(),
            Self::Data { .. } => None,
        }
    }

    /// Whether this is an error envelope.
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Error { .. })
    }

    /// The same result, for a call the staff member edited as they approved it: `note` says so
    /// (`staffEdits` beside a success; before the text of a failure).
    #[must_use]
    pub fn with_staff_edits(self, note: String) -> Self {
        match self {
            Self::Data {
                data,
                scope_context,
                ..
            } => Self::Data {
                data,
                scope_context,
                staff_edits: Some(note),
            },
            Self::Error { error, ask } => Self::Error {
                error: format!("{note} {error}"),
                ask,
            },
        }
    }

    /// Maps the data, keeping the scope sentence.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> AgentToolResult<U> {
        match self.try_map(|data| Ok::<U, std::convert::Infallible>(f(data))) {
            Ok(mapped) => mapped,
            Err(never) => match never {},
        }
    }

    /// Maps the data with `f`, which may fail, keeping the scope sentence.
    pub fn try_map<U, E>(self, f: impl FnOnce(T) -> Result<U, E>) -> Result<AgentToolResult<U>, E> {
        Ok(match self {
            Self::Data {
                data,
                scope_context,
                staff_edits,
            } => AgentToolResult::Data {
                data: f(data)?,
                scope_context,
                staff_edits,
            },
            Self::Error { error, ask } => AgentToolResult::Error { error, ask },
        })
    }
}

impl<T: Serialize> AgentToolResult<T> {
    /// The envelope as the JSON string the model is handed.
    pub fn to_model_string(&self) -> String {
        // Serialising plain data types cannot fail; fall back to an error envelope rather than panic.
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"error\":\"result could not be encoded: {e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_envelope_is_byte_for_byte_the_seed_shape() {
        let ok = AgentToolResult::data(
            serde_json::json!({ "name": "Sciences" }),
            "across the whole school",
        );
        assert_eq!(
            ok.to_model_string(),
            r#"{"data":{"name":"Sciences"},"scopeContext":"across the whole school"}"#
        );
    }

    #[test]
    fn error_envelope_is_byte_for_byte_the_seed_shape() {
        let denied: AgentToolResult<()> =
            AgentToolResult::error("Permission denied: create:Department");
        assert_eq!(
            denied.to_model_string(),
            r#"{"error":"Permission denied: create:Department"}"#
        );
    }

    #[test]
    fn parses_both_shapes_and_nothing_else() {
        let ok: AgentToolResult<Vec<u8>> =
            serde_json::from_str(r#"{"data":[1],"scopeContext":"x"}"#).unwrap();
        assert_eq!(ok, AgentToolResult::data(vec![1], "x"));
        let err: AgentToolResult<Vec<u8>> = serde_json::from_str(r#"{"error":"no"}"#).unwrap();
        assert!(err.is_error());
        let asking: AgentToolResult<Vec<u8>> = serde_json::from_str(
            r#"{"error":"no","ask":{"question":"Which?","choices":["A (S1)","A (S2)"]}}"#,
        )
        .unwrap();
        assert_eq!(asking.ask().map(|a| a.choices.len()), Some(2));
        assert_eq!(
            asking.to_model_string(),
            r#"{"error":"no","ask":{"question":"Which?","choices":["A (S1)","A (S2)"]}}"#
        );
        assert!(serde_json::from_str::<AgentToolResult<Vec<u8>>>(r#"{"data":[1]}"#).is_err());
        let edited = AgentToolResult::data(vec![1_u8], "x").with_staff_edits("Edited.".into());
        let text = edited.to_model_string();
        assert_eq!(
            text,
            r#"{"data":[1],"scopeContext":"x","staffEdits":"Edited."}"#
        );
        assert_eq!(
            serde_json::from_str::<AgentToolResult<Vec<u8>>>(&text).unwrap(),
            edited
        );
        assert!(
            serde_json::from_str::<AgentToolResult<Vec<u8>>>(
                r#"{"data":[1],"scopeContext":"x","error":"y"}"#
            )
            .is_err()
        );
    }
}

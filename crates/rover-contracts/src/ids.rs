//! Typed identifiers: one newtype per entity, so a class id can never be passed where a school id is meant.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The input was not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a valid {kind} id")]
pub struct InvalidId {
    kind: &'static str,
    input: String,
}

macro_rules! uuid_ids {
    ($($(#[$doc:meta])* $name:ident => $kind:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A fresh random id.
            pub fn new() -> Self {
                Self(Uuid::new_v4())
            }

            /// Wraps an existing UUID (from a database row, say).
            pub const fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// Parses the textual form; the error names the kind of id that was expected.
            pub fn parse(input: &str) -> Result<Self, InvalidId> {
                Uuid::parse_str(input)
                    .map(Self)
                    .map_err(|_| InvalidId { kind: $kind, input: input.chars().take(64).collect() })
            }

            /// The underlying UUID.
            pub const fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
    )*};
}

uuid_ids! {
    /// A school: the tenant. Every tenant row carries one.
    SchoolId => "school";
    /// A campus of a school.
    CampusId => "campus";
    /// A staff member's user account.
    UserId => "user";
    /// A staff member's profile.
    ProfileId => "profile";
    /// An academic year.
    AcademicYearId => "academic year";
    /// A term within an academic year.
    TermId => "term";
    /// A department.
    DepartmentId => "department";
    /// A subject taught in a department.
    SubjectId => "subject";
    /// A class (a stream of students on one campus).
    ClassId => "class";
    /// A student.
    StudentId => "student";
    /// A teaching assignment (teacher × class × subject × year).
    TeachingAssignmentId => "teaching assignment";
    /// A chat thread (the `id` of a `useChat` conversation).
    ThreadId => "thread";
    /// One turn of a thread: a user message and everything Rover does to answer it.
    TurnId => "turn";
    /// A stored artifact of a thread.
    ArtifactId => "artifact";
}

/// The id of one tool call, as the model named it, made unique within its turn.
///
/// It is the idempotency key of the tool server's inbox: a call repeated with the same id returns
/// the stored reply instead of running again, so it must be the same on every retry of the call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ToolCallId(String);

impl ToolCallId {
    /// The longest call id accepted; model call ids are short, this only bounds hostile input.
    pub const MAX_LEN: usize = 200;

    /// Scopes the model's own call id (unique only within a response) to the turn.
    pub fn for_turn(turn: TurnId, model_call_id: &str) -> Self {
        Self(format!("{turn}/{model_call_id}"))
    }

    /// Whether this id was scoped to `turn` by [`ToolCallId::for_turn`] (`<turn>/…`): the tool
    /// server runs a call only under the turn identity of the turn its id names.
    pub fn belongs_to(&self, turn: TurnId) -> bool {
        self.0
            .strip_prefix(&turn.to_string())
            .is_some_and(|rest| rest.len() > 1 && rest.starts_with('/'))
    }

    /// Accepts an id received on the wire, refusing empty or oversized ones.
    pub fn parse(input: &str) -> Result<Self, InvalidId> {
        if input.is_empty() || input.len() > Self::MAX_LEN || input.chars().any(char::is_control) {
            return Err(InvalidId {
                kind: "tool call",
                input: input.chars().take(64).collect(),
            });
        }
        Ok(Self(input.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolCallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_the_kind_it_expected() {
        let err = SchoolId::parse("not-a-uuid").unwrap_err();
        assert_eq!(err.to_string(), "`not-a-uuid` is not a valid school id");
        let id = ClassId::new();
        assert_eq!(ClassId::parse(&id.to_string()), Ok(id));
    }

    #[test]
    fn ids_serialise_as_bare_uuids() {
        let id = SchoolId::new();
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{id}\""));
    }

    #[test]
    fn tool_call_ids_are_bounded() {
        assert!(ToolCallId::parse("").is_err());
        assert!(ToolCallId::parse(&"x".repeat(201)).is_err());
        assert!(ToolCallId::parse("a\nb").is_err());
        let turn = TurnId::new();
        assert_eq!(
            ToolCallId::for_turn(turn, "call_1").as_str(),
            format!("{turn}/call_1")
        );
    }
}

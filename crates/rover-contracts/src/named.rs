//! [`Named`]: a tool argument that names a class, student, subject, teacher, department or term
//! the way staff say it ("S1 Blue", "Nakato", "Maths", "Okello") — or by its id, for callers
//! that hold ids (MCP clients, REST). The tool server resolves it on the server, in the caller's
//! school and campus (`rover_domain::resolve`), so a small model makes one call where it would
//! otherwise have to look an id up first.

use std::fmt;
use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

use crate::ids::{ClassId, DepartmentId, StudentId, SubjectId, TermId, UserId};

/// The longest name accepted; the schema says so too.
pub const MAX_NAME_CHARS: usize = 100;

/// The kind of thing a [`Named`] argument names: what its id type is, and what it is called in
/// a sentence ("No class called …").
pub trait NamedKind {
    /// "class", "student", …
    const KIND: &'static str;
    /// The id's type.
    type Id: Copy;
    /// Wraps a UUID.
    fn id(uuid: Uuid) -> Self::Id;
    /// The UUID inside.
    fn uuid(id: Self::Id) -> Uuid;
}

macro_rules! kinds {
    ($($id:ty => $kind:literal;)*) => {$(
        impl NamedKind for $id {
            const KIND: &'static str = $kind;
            type Id = $id;
            fn id(uuid: Uuid) -> $id {
                <$id>::from_uuid(uuid)
            }
            fn uuid(id: $id) -> Uuid {
                id.as_uuid()
            }
        }
    )*};
}

kinds! {
    ClassId => "class";
    StudentId => "student";
    SubjectId => "subject";
    UserId => "teacher";
    DepartmentId => "department";
    TermId => "term";
}

/// What the caller said for a `K` (`ClassId`, `StudentId`, …): a name or an id, as written.
pub struct Named<K> {
    said: String,
    kind: PhantomData<fn() -> K>,
}

/// What a [`Named`] turned out to be, before it is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said<'a, I> {
    /// An id (the textual form of a UUID).
    Id(I),
    /// Anything else: a name, to be matched.
    Name(&'a str),
}

impl<K: NamedKind> Named<K> {
    /// A name, as staff say it.
    pub fn name(said: impl Into<String>) -> Self {
        Self {
            said: said.into(),
            kind: PhantomData,
        }
    }

    /// An id: what REST and callers holding ids pass.
    pub fn id(id: K::Id) -> Self {
        Self::name(K::uuid(id).to_string())
    }

    /// The words as the caller wrote them.
    pub fn said(&self) -> &str {
        &self.said
    }

    /// An id, if the text is one; otherwise the name to match.
    pub fn parse(&self) -> Said<'_, K::Id> {
        match Uuid::parse_str(self.said.trim()) {
            Ok(uuid) => Said::Id(K::id(uuid)),
            Err(_) => Said::Name(&self.said),
        }
    }
}

impl<K> Clone for Named<K> {
    fn clone(&self) -> Self {
        Self {
            said: self.said.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> PartialEq for Named<K> {
    fn eq(&self, other: &Self) -> bool {
        self.said == other.said
    }
}

impl<K> Eq for Named<K> {}

impl<K> fmt::Debug for Named<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Named({:?})", self.said)
    }
}

impl<K> Serialize for Named<K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.said)
    }
}

impl<'de, K> Deserialize<'de> for Named<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self {
            said: String::deserialize(deserializer)?,
            kind: PhantomData,
        })
    }
}

impl<K> JsonSchema for Named<K> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Named".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS })
    }
}

/// How many characters must change to turn one spelling into the other (Levenshtein, by
/// characters): how near a word a staff member wrote is to a name, wherever names are matched
/// (the tool server's resolver, the worker's respelling).
#[must_use]
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_told_from_a_name() {
        let id = ClassId::new();
        assert_eq!(Named::<ClassId>::id(id).parse(), Said::Id(id));
        assert_eq!(
            Named::<ClassId>::name("S1 Blue").parse(),
            Said::Name("S1 Blue")
        );
        // Something like an id, but not one, is a name (and will not match).
        assert_eq!(
            Named::<ClassId>::name("e2fab0a2fd19").parse(),
            Said::Name("e2fab0a2fd19")
        );
    }

    #[test]
    fn it_is_a_plain_string_on_the_wire() {
        let named: Named<StudentId> = serde_json::from_str("\"Nakato\"").unwrap();
        assert_eq!(named.said(), "Nakato");
        assert_eq!(serde_json::to_string(&named).unwrap(), "\"Nakato\"");
        assert!(serde_json::from_str::<Named<StudentId>>("3").is_err());
    }

    #[test]
    fn edit_distance_counts_characters() {
        assert_eq!(super::edit_distance("nakatto", "nakato"), 1);
        assert_eq!(super::edit_distance("", "abc"), 3);
        assert_eq!(super::edit_distance("kitten", "sitting"), 3);
        assert_eq!(super::edit_distance("é", "e"), 1);
    }
}

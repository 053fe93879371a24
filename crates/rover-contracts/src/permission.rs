//! Permissions as `action:Subject` pairs: the vocabulary shared by policy rows, the advisory snapshot
//! in the runtime context, tool postures and denial messages.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a permission allows doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// See rows.
    Read,
    /// Add rows.
    Create,
    /// Change rows.
    Update,
    /// Remove rows.
    Delete,
}

/// What a permission is about. Names are the domain's entities, capitalised as in policy rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    /// Campuses of the school.
    Campus,
    /// Departments.
    Department,
    /// Subjects taught.
    Subject,
    /// Classes.
    Class,
    /// Students.
    Student,
    /// Staff members.
    Staff,
    /// Teaching assignments.
    TeachingAssignment,
    /// Marks and results.
    Mark,
    /// Attendance records.
    Attendance,
    /// Role assignments.
    Role,
}

macro_rules! names {
    ($ty:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),*];

            /// The name used in policy rows and `action:Subject` strings.
            pub const fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $text),* }
            }
        }

        impl FromStr for $ty {
            type Err = InvalidPermission;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($ty::$variant),)*
                    _ => Err(InvalidPermission(s.chars().take(64).collect())),
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

names!(Action { Read => "read", Create => "create", Update => "update", Delete => "delete" });
names!(Subject {
    Campus => "Campus",
    Department => "Department",
    Subject => "Subject",
    Class => "Class",
    Student => "Student",
    Staff => "Staff",
    TeachingAssignment => "TeachingAssignment",
    Mark => "Mark",
    Attendance => "Attendance",
    Role => "Role",
});

/// The text was not a known `action:Subject` pair.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a known permission (expected `action:Subject`, e.g. `create:Department`)")]
pub struct InvalidPermission(String);

/// One permission, written `action:Subject` (`create:Department`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permission {
    /// What may be done.
    pub action: Action,
    /// To what.
    pub subject: Subject,
}

impl Permission {
    /// A permission from its parts; `const` so tool contracts can name theirs.
    pub const fn new(action: Action, subject: Subject) -> Self {
        Self { action, subject }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.action, self.subject)
    }
}

impl FromStr for Permission {
    type Err = InvalidPermission;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidPermission(s.chars().take(64).collect());
        let (action, subject) = s.split_once(':').ok_or_else(invalid)?;
        Ok(Self {
            action: action.parse().map_err(|_| invalid())?,
            subject: subject.parse().map_err(|_| invalid())?,
        })
    }
}

impl Serialize for Permission {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Permission {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Permission {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Permission".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^[a-z]+:[A-Za-z]+$" })
    }
}

/// The flattened `action:Subject` list a user's roles allow in their school.
///
/// *Advisory only*: the worker uses it to leave out tools that would be denied. The tool server never
/// trusts it; it decides again from live policy on every call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct PermissionSnapshot(Vec<Permission>);

impl PermissionSnapshot {
    /// A snapshot of these permissions, sorted and without repeats.
    pub fn new(mut permissions: Vec<Permission>) -> Self {
        permissions.sort_unstable();
        permissions.dedup();
        Self(permissions)
    }

    /// Whether the snapshot lists this permission.
    pub fn allows(&self, permission: Permission) -> bool {
        self.0.binary_search(&permission).is_ok()
    }

    /// The permissions, sorted.
    pub fn iter(&self) -> impl Iterator<Item = Permission> + '_ {
        self.0.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        for action in Action::ALL {
            for subject in Subject::ALL {
                let p = Permission::new(*action, *subject);
                assert_eq!(p.to_string().parse::<Permission>(), Ok(p));
            }
        }
        assert_eq!(
            serde_json::to_string(&Permission::new(Action::Create, Subject::Department)).unwrap(),
            "\"create:Department\""
        );
    }

    #[test]
    fn rejects_unknown_text() {
        for bad in [
            "create",
            "create:",
            ":Department",
            "Create:Department",
            "create:department",
            "fly:Department",
        ] {
            assert!(bad.parse::<Permission>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn snapshot_is_sorted_and_answers_allows() {
        let read = Permission::new(Action::Read, Subject::Class);
        let create = Permission::new(Action::Create, Subject::Department);
        let snapshot = PermissionSnapshot::new(vec![read, create, read]);
        assert!(snapshot.allows(read) && snapshot.allows(create));
        assert!(!snapshot.allows(Permission::new(Action::Delete, Subject::Class)));
        assert_eq!(snapshot.iter().count(), 2);
        let json = serde_json::to_string(&snapshot).unwrap();
        assert_eq!(
            serde_json::from_str::<PermissionSnapshot>(&json).unwrap(),
            snapshot
        );
    }
}

//! A value that must never be printed: passwords, keys, connection strings with credentials.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Wraps a secret. `Debug`, `Display` and `Serialize` all print `********`; read it with
/// [`Secret::expose`], at the one place that hands it to a client library.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a value.
    pub const fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret itself. Call it only where the value is handed to the library that needs it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

const MASK: &str = "********";

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

impl<T> Serialize for Secret<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(MASK)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Secret<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Secret)
    }
}

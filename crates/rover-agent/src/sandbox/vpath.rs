//! Virtual paths: the model's names for files, lexically normalised, never reaching outside the
//! thread's directory.

use std::fmt;

use super::*;

/// A lexically normalised virtual path: plain names only, no `.`, `..` or empty segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct VirtualPath {
    pub(super) segments: Vec<String>,
}

impl VirtualPath {
    /// Parses an absolute virtual path, resolving `.` and `..` lexically and refusing anything that
    /// could name a place outside the sandbox.
    pub(super) fn parse(input: &str) -> Result<VirtualPath, SandboxError> {
        let shown = || quoted(input);
        let invalid = |why: String| Err(SandboxError::Invalid(why));
        if input.is_empty() {
            return invalid(
                "The path is empty; give an absolute path such as /notes.md.".to_owned(),
            );
        }
        if input.len() > MAX_PATH_LEN {
            return invalid(format!("The path is longer than {MAX_PATH_LEN} bytes."));
        }
        if input.contains('\0') {
            return invalid(format!("The path {} contains a NUL byte.", shown()));
        }
        if input.chars().any(char::is_control) {
            return invalid(format!("The path {} contains control characters.", shown()));
        }
        if input.contains('\\') {
            return invalid(format!(
                "The path {} contains a backslash; use forward slashes, as in /notes/plan.md.",
                shown()
            ));
        }
        if !input.starts_with('/') {
            return invalid(format!(
                "The path {} is not absolute; paths start with /, as in /notes/plan.md.",
                shown()
            ));
        }
        let mut segments: Vec<String> = Vec::new();
        for segment in input.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    if segments.pop().is_none() {
                        return invalid(format!(
                            "The path {} leads outside this chat's files.",
                            shown()
                        ));
                    }
                }
                name if name.len() > MAX_NAME_LEN => {
                    return invalid(format!(
                        "A name in the path {} is longer than {MAX_NAME_LEN} bytes.",
                        shown()
                    ));
                }
                name if name.starts_with(TEMP_PREFIX) => {
                    return invalid(format!(
                        "Names starting with {TEMP_PREFIX} are reserved; choose another name."
                    ));
                }
                name => segments.push(name.to_owned()),
            }
        }
        Ok(VirtualPath { segments })
    }

    /// The path of the first `depth` segments.
    pub(super) fn prefix(&self, depth: usize) -> VirtualPath {
        VirtualPath {
            segments: self.segments[..depth].to_vec(),
        }
    }

    /// The path of a child named `name`.
    pub(super) fn child(&self, name: &str) -> VirtualPath {
        let mut segments = self.segments.clone();
        segments.push(name.to_owned());
        VirtualPath { segments }
    }
}

impl fmt::Display for VirtualPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("/");
        }
        for segment in &self.segments {
            write!(f, "/{segment}")?;
        }
        Ok(())
    }
}

/// The model's input, quoted and escaped for an error message, cut to a readable length.
pub(super) fn quoted(input: &str) -> String {
    const SHOWN: usize = 120;
    let escaped: String = input
        .chars()
        .take(SHOWN)
        .flat_map(char::escape_debug)
        .collect();
    let more = if input.chars().count() > SHOWN {
        "…"
    } else {
        ""
    };
    format!("\"{escaped}{more}\"")
}

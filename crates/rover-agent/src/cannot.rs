//! What a caller cannot do, in words: the phrases Rover's prompt lists the writes it was not
//! given with (`prompt`), and the plain answer the worker gives when the model reaches for one
//! anyway (`Agent::cannot_do`). Never a tool's name: a small model calls what it sees named.

use rover_contracts::tools::{Posture, Relationship, ToolContract, ToolKind};

/// What a tool does, in words and not by its name (a small model calls a tool it sees named, even
/// under "cannot"): its label without the ellipsis, "recording attendance".
pub fn doing(contract: &ToolContract) -> String {
    let label = contract.label.trim_end_matches('…');
    let mut chars = label.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

/// Who may make a write the staff member was not given, said to them.
pub(crate) fn who_may_you(contract: &ToolContract) -> &'static str {
    match contract.kind {
        ToolKind::Rpc {
            posture: Posture::Relationship(Relationship::ClassTeacherOfClass),
            ..
        } => "only a class's class teacher can, and you are class teacher of no class",
        ToolKind::Rpc {
            posture: Posture::Relationship(_),
            ..
        } => "only the teacher of that subject and class can, and you teach none this year",
        _ => "your role in this school does not allow it",
    }
}

/// Who may make a write the caller was not given, in a phrase.
pub(crate) fn who_may(contract: &ToolContract) -> String {
    match contract.kind {
        ToolKind::Rpc {
            posture: Posture::Relationship(Relationship::ClassTeacherOfClass),
            ..
        } => "only a class's class teacher may; they are class teacher of no class".to_owned(),
        ToolKind::Rpc {
            posture: Posture::Relationship(_),
            ..
        } => "only the teacher of that subject and class may; they teach none this year".to_owned(),
        ToolKind::Rpc {
            posture: Posture::Policy(_),
            ..
        } => "their roles do not allow it".to_owned(),
        ToolKind::Local { .. } => "not available here".to_owned(),
    }
}

//! The one check of free text staff type: names (departments, assessments, searches), chat
//! titles and feedback comments all go through [`clean_text`] or [`clean_lines`], so what one
//! refuses the others refuse too — control characters (NUL, escape sequences), and characters
//! that hide or reorder text on screen ([`is_invisible`]).

use crate::DomainError;

/// `value` trimmed, refused when empty, longer than `max` characters, or holding a control
/// character or an invisible one: a name, a title, a search — one line.
pub fn clean_text(value: &str, what: &str, max: usize) -> Result<String, DomainError> {
    check(value.trim(), what, max, char::is_control)
}

/// [`clean_text`] for text of several lines (a feedback comment): line breaks (`\n`, `\r\n` or a
/// lone `\r`, all kept as `\n`) and tabs are allowed; every other control character is not.
pub fn clean_lines(value: &str, what: &str, max: usize) -> Result<String, DomainError> {
    let value = value.trim().replace("\r\n", "\n").replace('\r', "\n");
    check(&value, what, max, |c| {
        c.is_control() && c != '\n' && c != '\t'
    })
}

fn check(
    value: &str,
    what: &str,
    max: usize,
    refused_control: impl Fn(char) -> bool,
) -> Result<String, DomainError> {
    if value.is_empty() {
        return Err(DomainError::Invalid(format!(
            "The {what} must not be empty."
        )));
    }
    if value.chars().count() > max {
        return Err(DomainError::Invalid(format!(
            "The {what} must be at most {max} characters long."
        )));
    }
    if value.chars().any(refused_control) {
        return Err(DomainError::Invalid(format!(
            "The {what} must not contain control characters."
        )));
    }
    if let Some(hidden) = value.chars().find(|&c| is_invisible(c)) {
        return Err(DomainError::Invalid(format!(
            "The {what} must not contain invisible or text-direction characters (it has U+{:04X}).",
            u32::from(hidden)
        )));
    }
    Ok(value.to_owned())
}

/// `text` without the characters [`clean_text`] refuses (control and invisible ones), for text
/// derived from what staff typed rather than typed for the purpose — a chat's title taken from
/// its first message.
#[must_use]
pub fn without_hidden(text: &str) -> String {
    text.chars()
        .filter(|&c| (!c.is_control() || c.is_whitespace()) && !is_invisible(c))
        .collect()
}

/// Characters that show nothing, or change how the text around them is ordered on screen: the
/// Unicode format characters (bidirectional embeddings, overrides, isolates and marks; zero-width
/// spaces and joiners; the byte-order mark; tags) and the blank Hangul fillers. In a name they let
/// one staff member plant text that reads differently to a colleague, or to the model, than what
/// is stored.
#[must_use]
pub fn is_invisible(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD
            | 0x034F
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFEFF
            | 0xFFA0
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What names, titles and comments all refuse.
    const HIDDEN: [&str; 8] = [
        "Sciences\u{202E}txt.exe",
        "Scien\u{200B}ces",
        "\u{2066}Sciences\u{2069}",
        "Sciences\u{200F}",
        "\u{FEFF}Sciences",
        "Sci\u{00AD}ences",
        "Sciences\u{E0041}",
        "\u{3164}",
    ];

    #[test]
    fn names_with_invisible_or_direction_characters_are_refused() {
        for name in HIDDEN {
            for error in [
                clean_text(name, "department name", 80).unwrap_err(),
                clean_lines(name, "comment", 80).unwrap_err(),
            ] {
                assert!(error.to_string().contains("invisible"), "{name:?}: {error}");
            }
        }
        for name in [
            "Sciences",
            "Kiswahili na Lugha",
            "Études",
            "सूचना",
            "数学",
            "Art ❤️",
        ] {
            assert_eq!(clean_text(name, "department name", 80).unwrap(), name);
            assert_eq!(clean_lines(name, "comment", 80).unwrap(), name);
        }
    }

    #[test]
    fn text_is_trimmed_and_bounded() {
        assert_eq!(clean_text("  Sciences ", "name", 100).unwrap(), "Sciences");
        assert!(clean_text("   ", "name", 100).is_err());
        assert!(clean_text(&"x".repeat(101), "name", 100).is_err());
        assert!(clean_text("a\nb", "name", 100).is_err());
    }

    #[test]
    fn control_characters_are_refused_but_a_comment_keeps_its_lines() {
        for control in ["a\0b", "a\u{1b}[31mb", "a\u{7f}b", "a\u{85}b", "a\u{8}b"] {
            let error = clean_text(control, "title", 100).unwrap_err();
            assert!(error.to_string().contains("control"), "{control:?}");
            let error = clean_lines(control, "comment", 100).unwrap_err();
            assert!(error.to_string().contains("control"), "{control:?}");
        }
        assert!(clean_text("a\rb", "title", 100).is_err());
        assert_eq!(
            clean_lines(" one\r\ntwo\rthree\n\tfour ", "comment", 100).unwrap(),
            "one\ntwo\nthree\n\tfour"
        );
    }

    #[test]
    fn hidden_characters_are_dropped_from_derived_text() {
        assert_eq!(
            without_hidden("Sci\u{200B}ences\u{202E} \0list\u{1b}\tnow"),
            "Sciences list\tnow"
        );
        for name in HIDDEN {
            assert!(
                clean_text(&without_hidden(name), "name", 80).is_ok()
                    || without_hidden(name).trim().is_empty()
            );
        }
    }
}

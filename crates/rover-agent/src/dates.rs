//! Whether a staff member's message names a day: the worker keeps a write's `date` only then (see
//! `said::Said::hold`). Generous on purpose — a false "yes" leaves the date to the tool,
//! which still holds it to the current term; a false "no" would move a register to today.

const DAY_WORDS: &[&str] = &[
    "yesterday",
    "tomorrow",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "weekend",
    "week",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
];

/// Whether `text` names a day: a date (`2026-04-15`, `15/4`, `15th`), a weekday, a month,
/// "yesterday" or "tomorrow", or a week.
pub(crate) fn names_a_day(text: &str) -> bool {
    text.split_whitespace().any(|token| {
        // "yesterday's" is "yesterday".
        let token = token.split(['\'', '’']).next().unwrap_or_default();
        let word: String = token
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        DAY_WORDS.contains(&word.as_str()) || is_date(&word)
    })
}

/// `2026-04-15`, `15/04/2026`, `15.4`, or an ordinal day (`15th`, `1st`).
fn is_date(word: &str) -> bool {
    let digits = word.chars().filter(char::is_ascii_digit).count();
    let separated = word.contains(['-', '/', '.'])
        && word
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '-' | '/' | '.'))
        && digits >= 2;
    let ordinal = ["st", "nd", "rd", "th"].iter().any(|suffix| {
        word.strip_suffix(suffix).is_some_and(|day| {
            !day.is_empty() && day.len() <= 2 && day.chars().all(|c| c.is_ascii_digit())
        })
    });
    separated || ordinal
}

#[cfg(test)]
mod tests {
    use super::names_a_day;

    #[test]
    fn a_message_that_names_no_day_is_told_apart() {
        for text in [
            "Record attendance for S1 Blue: everyone present except Nakato",
            "Take the register for S1 Blue, Nakato and Mugisha are absent",
            "Give Nakato 75 for the maths quiz",
            "Actually Mugisha was away too",
            "Mark Mugisha and Achieng absent today",
        ] {
            assert!(!names_a_day(text), "{text}");
        }
        for text in [
            "Record yesterday's attendance for S1 Blue",
            "Nakato was absent on Monday",
            "Attendance for 2026-11-30: Nakato absent",
            "Register for 30/11: everyone present",
            "Nakato was away on the 3rd",
            "Attendance for 3 December",
            "Last week Mugisha was absent",
        ] {
            assert!(names_a_day(text), "{text}");
        }
    }
}

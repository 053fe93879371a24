//! Whether a reply tells the staff member that something was done: created, recorded, assigned,
//! renamed, added, updated, saved or marked. A reply that says so while nothing was written makes
//! the staff member believe a change that never happened: the worker never passes a specialist's
//! answer that claims one when the specialist wrote nothing (`run::delegate`), and the eval's
//! `claims` score fails a turn whose reply claims one without an audit row.
//!
//! A sentence claims when one of those verbs, in the past, completes an action:
//!
//! - a perfect or passive: "I have recorded", "I've successfully assigned", "Attendance for S1
//!   Blue has been recorded", "The department was renamed", "Nakato is now marked absent";
//! - a simple past with "I" or "we": "I created the department";
//! - "successfully" beside it: "Marks saved successfully";
//! - a short report that opens its clause: "Attendance recorded for S1 Blue.", "Done — marks
//!   saved.".
//!
//! Not claims: a question ("Would you like me to create…?"), a negation near the verb ("I could
//! not record…", "has not been recorded", "nothing was saved", "no marks were added"), a modal or
//! an infinitive ("will be recorded", "can be created", "needs to be marked", "would have
//! assigned"), a verb in another form ("I can't record attendance"), a condition ("once
//! recorded, …", "if it is saved"), and what was so before the turn ("has already been
//! recorded").

/// The verbs of a change, in the past.
const DONE: [&str; 12] = [
    "created",
    "recorded",
    "assigned",
    "renamed",
    "added",
    "updated",
    "saved",
    "marked",
    "registered",
    "entered",
    "logged",
    "changed",
];

/// Words of a new name, a claim only as "is now called …".
const STATE: [&str; 2] = ["called", "named"];

/// Words that may stand between an auxiliary and its verb without changing what is claimed.
const BETWEEN: [&str; 11] = [
    "successfully",
    "now",
    "just",
    "also",
    "all",
    "both",
    "correctly",
    "been",
    "each",
    "duly",
    "properly",
];

/// Words that make the verb near them not a claim.
const NEGATION: [&str; 12] = [
    "not", "no", "nothing", "none", "never", "neither", "nor", "unable", "failed", "cannot",
    "without", "nobody",
];

/// Words that make what follows them hypothetical, conditional or wished for.
const MODAL: [&str; 21] = [
    "will", "would", "could", "should", "can", "may", "might", "must", "shall", "to", "be",
    "being", "if", "once", "when", "whether", "unless", "until", "after", "before", "please",
];

/// Whether `text` says what Rover will do ("I'll ask the class teacher", "Let me check")
/// rather than asking the staff member something: a small model announces a call and stops.
pub fn promise(text: &str) -> bool {
    const PROMISES: [&str; 5] = [
        "i'll ",
        "i will ",
        "let me ",
        "i am going to ",
        "i'm going to ",
    ];
    let lower = text.to_lowercase().replace('\u{2019}', "'");
    !lower.trim_end().ends_with('?') && PROMISES.iter().any(|p| lower.contains(p))
}

/// The first sentence of `text` that claims a change was made, if any.
pub fn claim(text: &str) -> Option<String> {
    sentences(text)
        .into_iter()
        .find(|sentence| claims(sentence))
        .map(|s| s.trim().chars().take(160).collect())
}

/// Sentences, each with its closing mark; a closing bracket (`[class_teacher] …`), a colon or a
/// line break ends one too.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if matches!(c, '.' | '!' | '?' | '\n' | ']' | ':' | ';') {
            out.push(std::mem::take(&mut current));
        }
    }
    out.push(current);
    out.retain(|s| !s.trim().is_empty());
    out
}

fn claims(sentence: &str) -> bool {
    if sentence.trim_end().ends_with('?') {
        return false;
    }
    // Clauses: a negation or a condition in one does not reach into the next.
    sentence
        .split([',', '—', '–', '(', ')'])
        .flat_map(|clause| clause.split(" but ").map(str::to_owned).collect::<Vec<_>>())
        .any(|clause| {
            let words = words(&clause);
            (0..words.len()).any(|i| claims_at(&words, i))
        })
}

/// Lower-case words, contractions opened ("I've" → "i have", "hasn't" → "has not").
fn words(clause: &str) -> Vec<String> {
    let mut out = Vec::new();
    let normalised = clause.replace('’', "'").to_lowercase();
    for raw in normalised.split(|c: char| !(c.is_alphanumeric() || c == '\'')) {
        let word = raw.trim_matches('\'');
        if word.is_empty() {
            continue;
        }
        match word {
            "can't" | "cannot" => out.extend(["can", "not"].map(str::to_owned)),
            "won't" => out.extend(["will", "not"].map(str::to_owned)),
            _ => {
                if let Some(stem) = word.strip_suffix("n't") {
                    out.push(stem.to_owned());
                    out.push("not".to_owned());
                } else if let Some(stem) = word.strip_suffix("'ve") {
                    out.push(stem.to_owned());
                    out.push("have".to_owned());
                } else if let Some(stem) = word.strip_suffix("'s") {
                    out.push(stem.to_owned());
                    out.push("'s".to_owned());
                } else {
                    out.push(word.to_owned());
                }
            }
        }
    }
    out
}

fn claims_at(words: &[String], i: usize) -> bool {
    if !DONE.contains(&words[i].as_str()) && !STATE.contains(&words[i].as_str()) {
        return false;
    }
    let before = &words[..i];
    // A negation shortly before the verb ("was not recorded", "nothing was saved", "I have not
    // yet added").
    if before
        .iter()
        .rev()
        .take(5)
        .any(|w| NEGATION.contains(&w.as_str()))
    {
        return false;
    }
    // Walk back over the words that may stand between an auxiliary and the verb.
    let mut j = i;
    let mut successfully = words.get(i + 1).is_some_and(|w| w == "successfully");
    while j > 0 && (BETWEEN.contains(&words[j - 1].as_str()) || words[j - 1] == "already") {
        if words[j - 1] == "already" {
            // What was so before this turn, not what it did.
            return false;
        }
        successfully |= words[j - 1] == "successfully";
        j -= 1;
    }
    let skipped = &words[j..i];
    let auxiliary = j.checked_sub(1).map(|k| words[k].as_str());
    let before_auxiliary = j.checked_sub(2).map(|k| words[k].as_str());
    let modal_before_auxiliary = before_auxiliary.is_some_and(|w| MODAL.contains(&w));
    // "the students who were marked absent": a description of rows, not a report of a change.
    let relative = before_auxiliary.is_some_and(|w| matches!(w, "who" | "which" | "that"));
    let has_been = skipped.iter().any(|w| w == "been");
    if STATE.contains(&words[i].as_str()) {
        // "is now called Social Studies"; "I called the tool" is no claim.
        return matches!(auxiliary, Some("is" | "are")) && skipped.iter().any(|w| w == "now");
    }
    match auxiliary {
        // "has been recorded", "I have recorded", "it's been saved" (not "would have added").
        Some("have" | "has" | "had" | "'s") => !modal_before_auxiliary && !relative,
        // "was recorded", "were added".
        Some("was" | "were") => !relative,
        // "is now marked absent" (a present passive says what is so only with "now").
        Some("is" | "are") => skipped.iter().any(|w| w == "now") && !has_been,
        // "I created", "we added".
        Some("i" | "we") => !has_been,
        // "will be recorded", "to be saved", "can be created", "being added".
        Some(w) if MODAL.contains(&w) => false,
        // "Marks saved successfully."
        _ if successfully && !has_been => true,
        // A short report opening its clause: "Attendance recorded for S1 Blue".
        Some(_) => !has_been && opens_clause(before),
        // The clause opens with the verb ("Recorded: …" is a heading, "Added Nakato" a
        // report): only with "successfully", above.
        None => false,
    }
}

/// Whether the words before the verb are a short subject with no modal, condition or pronoun
/// that would make the verb something other than a report ("you marked", "the marks recorded
/// last term show").
fn opens_clause(before: &[String]) -> bool {
    const NOT_A_SUBJECT: [&str; 14] = [
        "you", "they", "he", "she", "it", "that", "which", "who", "what", "this", "these", "those",
        "any", "have",
    ];
    (1..=5).contains(&before.len())
        && before.iter().all(|w| {
            !MODAL.contains(&w.as_str())
                && !NOT_A_SUBJECT.contains(&w.as_str())
                && w.parse::<f64>().is_err()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_is_a_promise_and_a_question_is_not() {
        for text in [
            "To find out who teaches in S1 Blue, I'll ask the class teacher of S1 Blue.",
            "Let me check the roster.",
            "I\u{2019}m going to record that now.",
        ] {
            assert!(promise(text), "{text}");
        }
        for text in [
            "I'll need the class name: which class?",
            "The school has 4 departments.",
            "I cannot do that for you.",
        ] {
            assert!(!promise(text), "{text}");
        }
    }

    #[test]
    fn replies_that_say_a_change_was_made_claim_it() {
        for text in [
            "I have successfully assigned Okello to teach Physics in S1 Blue.",
            "Attendance for S1 Blue has been recorded.",
            "Done — I created the Sciences department across the whole school.",
            "Done — the Humanities department is now called Social Studies (across the whole school).",
            "I've recorded the marks for Nakato and Mugisha.",
            "The department was renamed to Social Studies.",
            "Nakato Sarah has been marked absent for today.",
            "Attendance recorded for S1 Blue: 4 present, 1 absent.",
            "Marks saved successfully.",
            "Successfully created the department Drama.",
            "I recorded 2 Mathematics marks for S1 Blue (Marks, Term 3).",
            "[class_teacher] Attendance for S1 Blue on 2026-12-04 has been recorded: 4 present.",
            "Great news! Both marks were added.",
            "It's been saved.",
            "Okay, Nakato is now marked absent.",
            "I called the `record_marks` function with the arguments. I have successfully assigned Okello.",
            "Marks for S1 Blue updated.",
            "No problem, I have recorded attendance for S1 Blue.",
            "Done — the Humanities department is now called Social Studies.",
        ] {
            assert!(claim(text).is_some(), "{text:?} should claim");
        }
    }

    #[test]
    fn refusals_offers_questions_and_plans_do_not_claim() {
        for text in [
            "I could not record the attendance: Nakato is not in S1 Blue.",
            "You are not the class teacher, so I can't record attendance.",
            "Would you like me to create the Sciences department?",
            "Shall I have the marks recorded?",
            "Attendance has not been recorded.",
            "Nothing was saved.",
            "No marks were added, because the subject was not found.",
            "I haven't created anything yet.",
            "Once recorded, the marks appear in the results summary.",
            "The attendance will be recorded when you confirm.",
            "Marks can be entered by the subject teacher.",
            "If it is saved twice, the second replaces the first.",
            "Attendance for today has already been recorded.",
            "I would have assigned Okello, but you are not the director of studies.",
            "The students you marked last term are listed below.",
            "Which student do you mean by \"Nakato\"?",
            "There are 3 departments: Languages, Mathematics and Humanities.",
            "I found 2 students matching \"Nakato\": Nakato Sarah (S1 Blue) and Nakato Mary (S2 Green).",
            "I'm not able to do that: I failed to create the department.",
            "Here are the students who were marked absent on Monday.",
            "I called the `find_students` tool and found Nakato Sarah.",
            "Create a department called Sciences?",
            "There is no department called Robotics.",
            "To record attendance, tell me which class and who was absent.",
            "The marks need to be recorded by a subject teacher.",
            "Recorded marks are kept for each term.",
            "",
        ] {
            assert_eq!(claim(text), None, "{text:?} should not claim");
        }
    }

    #[test]
    fn the_claiming_sentence_is_returned() {
        assert_eq!(
            claim("Let me check. Attendance for S1 Blue has been recorded. Anything else?")
                .as_deref(),
            Some("Attendance for S1 Blue has been recorded.")
        );
    }
}

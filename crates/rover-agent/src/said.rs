//! What the staff member said in this chat, and what a write's arguments are held to by it. A
//! small model fills a write's optional arguments with values nobody said: asked for today, it
//! sent a `date` of `2023-04-15`; asked to "give Nakato 75 for the maths quiz", it added the class
//! `S1 Blue` itself, which turned a name that fits two students into a guess. A write must never
//! land on what nobody said, so before a write is checked for approval or run, such an argument is
//! dropped and the tool takes its sound default (today from the school's calendar, the class from
//! the named students, the teacher's one class or subject) — or, where there is none, asks.
//!
//! The rules read the request the call serves — the message that started the turn's chain (a
//! continuation after an approval starts from that same message, so a held call is the same call
//! on both sides of the pause) — and every word the staff member wrote in the chat.

use std::collections::HashSet;

use rover_contracts::named::edit_distance;
use rover_contracts::tools::Effect;
use serde_json::Value;

use crate::agent::AgentTool;

/// What the staff member said, as the write rules read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Said {
    /// The request the turn serves: the staff member's message that started its chain, and — when
    /// the chain started from an answer to Rover's question — their message before it with the
    /// answer. `None`: nothing the staff member wrote is known, and no rule applies.
    request: Option<String>,
    /// Every word the staff member wrote in the chat, lower-case.
    words: HashSet<String>,
}

impl Said {
    /// What the staff member said in `history` (the thread's stored messages) and in `first`, the
    /// message the turn's chain starts from.
    pub(crate) fn of(history: &[Value], first: &Value) -> Self {
        let mut words = HashSet::new();
        for text in history.iter().chain([first]).filter_map(staff) {
            words.extend(words_of(text));
        }
        let request = match first["role"].as_str() {
            Some("user") => first["content"].as_str().map(str::to_owned),
            // An answer to a question Rover asked: the words of the answer belong to the request
            // they answer, the staff member's last message.
            Some("tool") => {
                let answer = first["content"].as_str().unwrap_or_default();
                words.extend(words_of(answer));
                history
                    .iter()
                    .rev()
                    .find_map(staff)
                    .map(|asked| format!("{asked}\n{answer}"))
            }
            _ => None,
        };
        Self { request, words }
    }

    /// A message's words, for a test: `request` is the request, and all the chat said.
    #[cfg(test)]
    pub(crate) fn message(request: &str) -> Self {
        Self {
            request: Some(request.to_owned()),
            words: words_of(request).collect(),
        }
    }

    /// The request the turn serves, as the staff member wrote it.
    pub(crate) fn request(&self) -> Option<&str> {
        self.request.as_deref()
    }

    /// `args` of a call to `tool`, held to what was said: for a write, a `date` when the request
    /// names no day, and an optional name (a class, subject, term — any optional text argument)
    /// that no word of the chat says, are dropped. An id is kept: it came from a tool's answer,
    /// and one the model made up resolves to nothing. Reads keep their arguments.
    pub(crate) fn hold(&self, tool: &AgentTool, mut args: Value) -> Value {
        let Some(request) = &self.request else {
            return args;
        };
        if tool.contract.effect != Effect::Write {
            return args;
        }
        let parameters = &tool.definition["function"]["parameters"];
        let required: Vec<&str> = parameters["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(object) = args.as_object_mut() else {
            return args;
        };
        object.retain(|name, value| {
            let property = &parameters["properties"][name.as_str()];
            if required.contains(&name.as_str()) || !takes_text(property) {
                return true;
            }
            match (property["format"].as_str(), value.as_str()) {
                (Some("date"), _) => crate::dates::names_a_day(request),
                (Some(_), _) | (None, None) => true,
                (None, Some(text)) => uuid::Uuid::parse_str(text).is_ok() || self.says(text),
            }
        });
        for (name, value) in object.iter_mut() {
            if parameters["properties"][name.as_str()]["format"].is_null() {
                self.respell(value);
            }
        }
        args
    }

    /// Puts back the staff member's own spelling of a name the model corrected: a word of a
    /// write's text that nobody said, one or two letters from a word the staff member wrote
    /// ("Nakato" where they wrote "Nakatto"), becomes their word. A small model fixes a
    /// misspelling to the nearest name it knows, which is a guess; written as the staff member
    /// spelt it, the name fits no one and the tool asks which they meant. Ids and dates are left.
    fn respell(&self, value: &mut Value) {
        match value {
            Value::String(text) if uuid::Uuid::parse_str(text).is_err() => {
                let respelt = respelt(text, &self.words);
                if respelt != *text {
                    tracing::info!(model = %text, staff = %respelt, "a name is written as the staff member spelt it");
                    *text = respelt;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.respell(item)),
            Value::Object(fields) => fields.values_mut().for_each(|field| self.respell(field)),
            _ => {}
        }
    }

    /// Whether the chat says `value`: each of its words (of two characters or more) was written
    /// by the staff member, or shares its first four letters with one ("Mathematics" for
    /// "maths"). Case, spaces and punctuation do not matter.
    fn says(&self, value: &str) -> bool {
        words_of(value)
            .filter(|w| w.chars().count() >= 2)
            .all(|word| {
                self.words.contains(&word) || self.words.iter().any(|said| same_stem(said, &word))
            })
    }
}

/// `text` with each word nobody said (nor said in other words, `same_stem`) that is a letter from
/// exactly one nearest word that was said — two letters, for words of seven or more — replaced
/// by it (both of four letters or more, letters only). The replacement
/// keeps the model's capitals where it can: `Nakato` → `Nakatto`.
fn respelt(text: &str, said: &HashSet<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(&respelt_word(word, said).unwrap_or_else(|| word.clone()));
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn respelt_word(word: &str, said: &HashSet<String>) -> Option<String> {
    let lower = word.to_lowercase();
    let letters = |w: &str| w.chars().count() >= 4 && w.chars().all(char::is_alphabetic);
    // Said, or said in other words ("Maths" for "mathematics"): the model's own word stands.
    let other_words = |w: &String| same_stem(w, &lower) && edit_distance(w, &lower) > 2;
    if !letters(&lower) || said.iter().any(|w| *w == lower || other_words(w)) {
        return None;
    }
    // A slip of a letter in a short name, two in a long one: "Maths" is not "marks".
    let slips = |w: &str| {
        if w.chars().count().min(lower.chars().count()) < 7 {
            1
        } else {
            2
        }
    };
    let mut near: Vec<(usize, &String)> = said
        .iter()
        .filter(|w| letters(w))
        .map(|w| (edit_distance(&lower, w), w))
        .filter(|(d, w)| (1..=slips(w)).contains(d))
        .collect();
    near.sort();
    match near.as_slice() {
        [(_, w)] => Some(capitalised(w, word)),
        [(d, w), (next, _), ..] if d < next => Some(capitalised(w, word)),
        _ => None,
    }
}

/// `said` with the first letter capitalised when `like` starts with a capital.
fn capitalised(said: &str, like: &str) -> String {
    let mut chars = said.chars();
    match (like.chars().next(), chars.next()) {
        (Some(c), Some(first)) if c.is_uppercase() => first.to_uppercase().chain(chars).collect(),
        _ => said.to_owned(),
    }
}

/// Whether a schema property takes text (`"string"` or `["string", "null"]`).
fn takes_text(property: &Value) -> bool {
    match &property["type"] {
        Value::String(kind) => kind == "string",
        Value::Array(kinds) => kinds.iter().any(|k| k == "string"),
        _ => false,
    }
}

/// The same first four letters, both words at least that long.
fn same_stem(a: &str, b: &str) -> bool {
    let stem = |w: &str| w.chars().take(4).collect::<String>();
    a.chars().count() >= 4 && b.chars().count() >= 4 && stem(a) == stem(b)
}

/// The text of a message the staff member wrote.
fn staff(message: &Value) -> Option<&str> {
    (message["role"] == "user")
        .then(|| message["content"].as_str())
        .flatten()
}

/// Lower-case words: runs of letters and digits.
fn words_of(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Said, edit_distance};
    use crate::agent::{AgentTool, definition};

    fn tool(name: &str) -> AgentTool {
        AgentTool::new(
            rover_contracts::tools::by_name(name).unwrap(),
            definition(name).unwrap(),
        )
    }

    #[test]
    fn a_name_the_model_corrected_is_written_as_the_staff_member_spelt_it() {
        let marks = tool("record_marks");
        let said = Said::message("Give Nakatto 80 for the maths test in S1 Blue");
        let call = json!({
            "class": "S1 Blue", "subject": "Maths", "assessment": "Maths test",
            "marks": [{ "student": "Nakato", "score": 80 }],
        });
        let held = said.hold(&marks, call);
        assert_eq!(held["marks"][0]["student"], "Nakatto");
        assert_eq!(held["subject"], "Maths", "a word said is kept");
        // Words nobody said with no near one, short words, ids and reads are left as they are.
        let said = Said::message("Record Mathematics marks for S1 Blue: Nakato 78, Mugisha 64");
        let call = json!({
            "class": "S1 Blue", "subject": "Mathematics", "assessment": "Mid-term test",
            "marks": [{ "student": "Nakato Sarah", "score": 78 },
                      { "student": "c1b3a6a0-0000-4000-8000-000000000000", "score": 64 }],
        });
        assert_eq!(said.hold(&marks, call.clone()), call);
        // "Maths" for "Mathematics" is the same word, never "marks" (two letters from it).
        let call = json!({
            "class": "S1 Blue", "subject": "Maths", "assessment": "Maths marks",
            "marks": [{ "student": "Nakato", "score": 78 }],
        });
        assert_eq!(said.hold(&marks, call.clone()), call);
        let roster = tool("get_class_roster");
        let read = json!({ "class": "S1 Bleu" });
        assert_eq!(
            Said::message("Who is in S1 Blue?").hold(&roster, read.clone()),
            read
        );
        // Two said words as near: no guess either way.
        let department = tool("create_department");
        let said = Said::message("Create Dramo or Drame, whichever");
        let call = json!({ "name": "Drama" });
        assert_eq!(said.hold(&department, call.clone()), call);
        assert_eq!(edit_distance("nakato", "nakatto"), 1);
        assert_eq!(edit_distance("maths", "mathematics"), 6);
    }

    #[test]
    fn a_date_the_staff_member_did_not_say_is_dropped_from_a_write() {
        let attendance = tool("record_attendance");
        let call = json!({ "class": "S1 Blue", "absent": ["Nakato"], "date": "2026-04-15" });
        let said = Said::message("Record attendance for S1 Blue: everyone present except Nakato");
        assert_eq!(
            said.hold(&attendance, call.clone()),
            json!({ "class": "S1 Blue", "absent": ["Nakato"] })
        );
        // Said: the date stays (the tool holds it to the current term).
        let said = Said::message("Record yesterday's attendance for S1 Blue: Nakato was absent");
        assert_eq!(said.hold(&attendance, call.clone()), call);
        // Nothing known of what was said: left to the tool.
        assert_eq!(Said::default().hold(&attendance, call.clone()), call);
        // A read keeps its arguments.
        let marks = tool("get_class_marks");
        let read = json!({ "class": "S1 Blue", "subject": "Maths", "term": "Term 9" });
        assert_eq!(Said::message("marks").hold(&marks, read.clone()), read);
    }

    #[test]
    fn a_name_nobody_said_is_dropped_from_a_write_and_one_said_in_other_words_is_kept() {
        let marks = tool("record_marks");
        let call = json!({
            "class": "S1 Blue", "subject": "Mathematics", "assessment": "Maths quiz",
            "marks": [{ "student": "Nakato", "score": 75 }],
        });
        // The model added the class: dropped (the students' names tell it, or it is asked).
        // "Mathematics" is the "maths" the staff member said. The required arguments stay.
        let said = Said::message("Give Nakato 75 for the maths quiz");
        assert_eq!(
            said.hold(&marks, call.clone()),
            json!({
                "subject": "Mathematics", "assessment": "Maths quiz",
                "marks": [{ "student": "Nakato", "score": 75 }],
            })
        );
        // Said, in any case and spacing: kept.
        let said = Said::message("give nakato 75 for the maths quiz in s1 blue");
        assert_eq!(said.hold(&marks, call.clone()), call);
        // An id is kept (it came from a tool's answer).
        let id = json!({ "class": "94005849-c447-5c1c-abfc-d35b3e175c44", "absent": [] });
        let said = Said::message("Take the register for my class");
        assert_eq!(said.hold(&tool("record_attendance"), id.clone()), id);
    }

    #[test]
    fn the_whole_chat_counts_and_an_answer_belongs_to_the_request_it_answers() {
        let attendance = tool("record_attendance");
        let history = [
            json!({ "role": "user", "content": "Record attendance for S1 Blue: Nakato absent" }),
            json!({ "role": "assistant", "content": "Recorded." }),
        ];
        let first = json!({ "role": "user", "content": "Actually Mugisha was away too" });
        let call =
            json!({ "class": "S1 Blue", "absent": ["Nakato", "Mugisha"], "date": "2026-01-01" });
        assert_eq!(
            Said::of(&history, &first).hold(&attendance, call),
            json!({ "class": "S1 Blue", "absent": ["Nakato", "Mugisha"] })
        );
        // A chain started by an answer to Rover's question: the message it answers is the
        // request (it named a day), the answer's words count.
        let history = [
            json!({ "role": "user", "content": "Yesterday Nakato was absent" }),
            json!({ "role": "assistant", "tool_calls": [{ "id": "ask-0" }] }),
        ];
        let answer = json!({ "role": "tool", "tool_call_id": "ask-0", "content": "{\"data\":\"S2 Green\"}" });
        let call = json!({ "class": "S2 Green", "absent": ["Nakato"], "date": "2026-12-05" });
        assert_eq!(
            Said::of(&history, &answer).hold(&attendance, call.clone()),
            call
        );
    }
}

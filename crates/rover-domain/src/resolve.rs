//! The one resolver: a class, student, subject, teacher, department or term named the way staff
//! say it ("S1 Blue", "Nakato", "Maths", "Okello", "Term 2") — or by id — becomes one row of the
//! caller's school (row-level security) and, in campus mode, campus. The tool server's
//! `execute()` reaches it through the domain functions, and REST can call it as they do.
//!
//! **Matching** is case-, space- and punctuation-insensitive. A name that is the candidate's
//! whole name (or a student's admission number) is *exact*; otherwise every word said must fit a
//! different word of the name — the same word, its beginning (`Nak` → Nakato), a plural's stem
//! (`Maths` → Mathematics) — or the name's initials (`PE`). One exact candidate wins; else one
//! that fits. A choice said back with its detail (`Nakato Sarah (S1 Blue, KHS003)`) is narrowed by
//! that detail, so every question's choices resolve.
//!
//! **Never a guess.** Two or more fits: [`Unresolved`] *ambiguous*, with the candidates and what
//! tells them apart. None: *not found*, with up to three near names (a shared word, a small
//! misspelling). Either way nothing is done, and the error carries the question to ask the staff
//! member ([`Ask`]), with the candidates as choices.

use std::fmt;

use rover_contracts::Ask;
use rover_contracts::named::{Named, NamedKind, Said, edit_distance};
use serde_json::{Value, json};
use sqlx::FromRow;
use uuid::Uuid;

use crate::{DomainError, TenantTx};

/// The most suggestions a not-found name comes with.
pub const MAX_SUGGESTIONS: usize = 3;
/// The most candidates an ambiguous name lists (and offers as choices).
pub const MAX_CANDIDATES: usize = 8;

/// One row a name may mean, as the resolver compares it.
#[derive(Debug, Clone, FromRow)]
pub struct Candidate {
    /// Its id.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// What tells it apart from another of the same name (a student's class and admission
    /// number, a class's campus, a teacher's email).
    pub detail: String,
    /// Another exact name (a student's admission number).
    pub alias: Option<String>,
}

impl Candidate {
    /// The candidate as a choice the staff member picks, and the model can pass back.
    pub fn choice(&self) -> String {
        if self.detail.is_empty() {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.detail)
        }
    }
}

/// A name that did not come to exactly one row: nothing was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// "class", "student", …
    pub kind: &'static str,
    /// The words the caller used.
    pub said: String,
    /// Where it was looked for, if narrower than the scope ("in S1 Blue").
    pub place: Option<String>,
    /// The candidates (ambiguous) or the nearest names (not found), as choices.
    pub choices: Vec<String>,
    /// Whether several rows fit (else none did).
    pub ambiguous: bool,
}

impl Unresolved {
    /// The question for the staff member, with the choices; `None` when there is nothing to
    /// choose from (a name with no near match).
    pub fn ask(&self) -> Option<Ask> {
        if self.choices.is_empty() {
            return None;
        }
        let question = if self.ambiguous {
            format!("Which {} do you mean by \"{}\"?", self.kind, self.said)
        } else {
            format!(
                "I could not find a {} called \"{}\"{}. Did you mean {}?",
                self.kind,
                self.said,
                self.place_text(),
                if self.choices.len() == 1 {
                    "this one"
                } else {
                    "one of these"
                }
            )
        };
        Some(Ask {
            question,
            choices: self.choices.clone(),
        })
    }

    fn place_text(&self) -> String {
        self.place
            .as_deref()
            .map_or_else(String::new, |place| format!(" {place}"))
    }
}

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, said, place) = (self.kind, &self.said, self.place_text());
        let list = self.choices.join("; ");
        if self.ambiguous {
            write!(
                f,
                "Not done: \"{said}\" fits more than one {kind}{place}: {list}. Nothing was changed; \
                 the staff member must say which one."
            )
        } else if self.choices.is_empty() {
            write!(
                f,
                "No {kind} called \"{said}\" was found{place}. Nothing was changed."
            )
        } else {
            write!(
                f,
                "Not done: no {kind} called \"{said}\" was found{place}. The nearest: {list}. \
                 Nothing was changed; the staff member must say which one they meant."
            )
        }
    }
}

/// What a named argument resolved to: the id, the row's name, and the words that named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The row.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// The words the caller used (a name, or the id itself).
    pub said: String,
}

impl Resolved {
    /// `{"said": …, "id": …}`: what the audit row records of it.
    pub fn audit(&self) -> Value {
        json!({ "said": self.said, "id": self.id })
    }
}

/// Picks the one candidate `said` names, or says why not (`kind` and `place` word the error).
pub fn pick<'a>(
    kind: &'static str,
    said: &str,
    place: Option<&str>,
    candidates: &'a [Candidate],
) -> Result<&'a Candidate, Unresolved> {
    let (name, qualifier) = split_qualifier(said);
    let name_words = words(name);
    let narrowed = |fits: Vec<&'a Candidate>| match qualifier.map(words) {
        Some(qualifier) if fits.len() > 1 => {
            let kept: Vec<&Candidate> = fits
                .iter()
                .copied()
                .filter(|c| fits_words(&qualifier, &words(&c.detail)))
                .collect();
            if kept.is_empty() { fits } else { kept }
        }
        _ => fits,
    };
    let exact = narrowed(
        candidates
            .iter()
            .filter(|c| is_exact(&name_words, c))
            .collect(),
    );
    let fits = if exact.is_empty() {
        narrowed(
            candidates
                .iter()
                .filter(|c| fits_words(&name_words, &words(&c.name)) || is_initials(&name_words, c))
                .collect(),
        )
    } else {
        exact
    };
    let unresolved = |choices: Vec<&Candidate>, ambiguous| Unresolved {
        kind,
        said: said.trim().chars().take(100).collect(),
        place: place.map(str::to_owned),
        choices: choices.iter().map(|c| c.choice()).collect(),
        ambiguous,
    };
    match fits.as_slice() {
        [one] => Ok(one),
        [] => Err(unresolved(suggestions(&name_words, candidates), false)),
        many => Err(unresolved(
            many.iter().copied().take(MAX_CANDIDATES).collect(),
            true,
        )),
    }
}

/// `"Nakato Sarah (S1 Blue, KHS003)"` → (`"Nakato Sarah"`, `Some("S1 Blue, KHS003")`).
fn split_qualifier(said: &str) -> (&str, Option<&str>) {
    let said = said.trim();
    match said.strip_suffix(')').and_then(|s| s.rsplit_once('(')) {
        Some((name, qualifier)) if !name.trim().is_empty() => (name.trim(), Some(qualifier)),
        _ => (said, None),
    }
}

/// Lower-case words of letters and digits: punctuation and spacing are not part of a name.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn is_exact(said: &[String], candidate: &Candidate) -> bool {
    let name = words(&candidate.name);
    !said.is_empty()
        && (said == name.as_slice()
            || said.concat() == name.concat()
            || candidate
                .alias
                .as_deref()
                .is_some_and(|alias| said.concat() == words(alias).concat()))
}

/// Whether every word said fits a different word of `name` (in any order).
fn fits_words(said: &[String], name: &[String]) -> bool {
    fn assign(said: &[String], name: &[String], used: &mut [bool]) -> bool {
        let Some((word, rest)) = said.split_first() else {
            return true;
        };
        for (i, candidate) in name.iter().enumerate() {
            if !used[i] && word_fits(word, candidate) {
                used[i] = true;
                if assign(rest, name, used) {
                    return true;
                }
                used[i] = false;
            }
        }
        false
    }
    !said.is_empty() && said.len() <= name.len() && assign(said, name, &mut vec![false; name.len()])
}

/// `said` fits `word`: the same word, its beginning of three letters or more, or a plural's stem
/// ("maths" → "mathematics").
fn word_fits(said: &str, word: &str) -> bool {
    said == word
        || (said.chars().count() >= 3 && word.starts_with(said))
        || (said.chars().count() >= 4
            && said
                .strip_suffix('s')
                .is_some_and(|stem| word.starts_with(stem)))
}

/// "PE" → "Physical Education": one word said, the initials of a name of two words or more.
fn is_initials(said: &[String], candidate: &Candidate) -> bool {
    let name = words(&candidate.name);
    let [said] = said else { return false };
    name.len() >= 2
        && said.chars().count() == name.len()
        && name.iter().zip(said.chars()).all(|(w, c)| w.starts_with(c))
}

/// Up to [`MAX_SUGGESTIONS`] candidates near what was said: those sharing a word, or a word a
/// small misspelling away, most such words first.
fn suggestions<'a>(said: &[String], candidates: &'a [Candidate]) -> Vec<&'a Candidate> {
    let mut near: Vec<(usize, usize, &Candidate)> = candidates
        .iter()
        .filter_map(|candidate| {
            let name = words(&candidate.name);
            let (mut close, mut distance) = (0, 0);
            for word in said {
                let best = name.iter().map(|w| edit_distance(word, w)).min()?;
                let allowed = (word.chars().count() / 4).max(1);
                let shares_stem = name.iter().any(|w| common_prefix(word, w) >= 4);
                if best <= allowed || shares_stem {
                    close += 1;
                    distance += best;
                }
            }
            (close > 0).then_some((close, distance, candidate))
        })
        .collect();
    near.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    near.into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, _, c)| c)
        .collect()
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// Resolves `named` among the candidate rows `query` (its arguments bound by `bind`) reads — only
/// when it is a name.
async fn resolve<K: NamedKind>(
    tx: &mut TenantTx,
    named: &Named<K>,
    place: Option<&str>,
    query: &str,
    bind: impl FnOnce(
        sqlx::query::QueryAs<'_, sqlx::Postgres, Candidate, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::QueryAs<
        '_,
        sqlx::Postgres,
        Candidate,
        sqlx::postgres::PgArguments,
    >,
) -> Result<Resolved, DomainError> {
    let candidates: Vec<Candidate> = if matches!(named.parse(), Said::Name(_)) {
        bind(sqlx::query_as(query))
            .fetch_all(tx.connection())
            .await?
    } else {
        Vec::new()
    };
    resolve_among(named, place, &candidates)
}

/// `named` among `candidates` (read only when it is a name): an id is taken as it is, and the
/// caller's look-up by id checks it is in scope.
fn resolve_among<K: NamedKind>(
    named: &Named<K>,
    place: Option<&str>,
    candidates: &[Candidate],
) -> Result<Resolved, DomainError> {
    match named.parse() {
        Said::Id(id) => Ok(Resolved {
            id: K::uuid(id),
            name: String::new(),
            said: named.said().to_owned(),
        }),
        Said::Name(said) => pick(K::KIND, said, place, candidates)
            .map(|found| Resolved {
                id: found.id,
                name: found.name.clone(),
                said: said.to_owned(),
            })
            .map_err(DomainError::Unresolved),
    }
}

/// A class of the school (of the campus, in campus mode).
pub async fn class(
    tx: &mut TenantTx,
    campus: Option<Uuid>,
    named: &Named<rover_contracts::ids::ClassId>,
) -> Result<Resolved, DomainError> {
    resolve(
        tx,
        named,
        None,
        "SELECT k.id, k.name, c.name AS detail, NULL::text AS alias FROM classes k \
         JOIN campuses c ON c.school_id = k.school_id AND c.id = k.campus_id \
         WHERE ($1::uuid IS NULL OR k.campus_id = $1) ORDER BY c.name, k.name, k.id",
        |q| q.bind(campus),
    )
    .await
}

/// Students of `classes`, each named by name or id (`place` words the error: "in S1 Blue"). The
/// candidates are read once, and only when one of them is a name.
pub async fn students(
    tx: &mut TenantTx,
    classes: &[Uuid],
    place: Option<&str>,
    named: &[Named<rover_contracts::ids::StudentId>],
) -> Result<Vec<Resolved>, DomainError> {
    let candidates: Vec<Candidate> = if named.iter().any(|n| matches!(n.parse(), Said::Name(_))) {
        sqlx::query_as(
            "SELECT s.id, s.name, k.name || ', ' || s.admission_number AS detail, \
                    s.admission_number AS alias FROM students s \
             JOIN classes k ON k.school_id = s.school_id AND k.id = s.class_id \
             WHERE s.class_id = ANY($1) ORDER BY s.name, k.name, s.id",
        )
        .bind(classes)
        .fetch_all(tx.connection())
        .await?
    } else {
        Vec::new()
    };
    named
        .iter()
        .map(|named| resolve_among(named, place, &candidates))
        .collect()
}

/// A subject of a school-wide department, or (in campus mode) of one of the campus.
pub async fn subject(
    tx: &mut TenantTx,
    campus: Option<Uuid>,
    named: &Named<rover_contracts::ids::SubjectId>,
) -> Result<Resolved, DomainError> {
    resolve(
        tx,
        named,
        None,
        "SELECT s.id, s.name, d.name || ' department' AS detail, NULL::text AS alias \
         FROM subjects s JOIN departments d ON d.school_id = s.school_id AND d.id = s.department_id \
         WHERE ($1::uuid IS NULL OR d.campus_id IS NULL OR d.campus_id = $1) ORDER BY s.name, s.id",
        |q| q.bind(campus),
    )
    .await
}

/// A staff member of the school (school-wide, or of the campus in campus mode).
pub async fn staff(
    tx: &mut TenantTx,
    campus: Option<Uuid>,
    named: &Named<rover_contracts::ids::UserId>,
) -> Result<Resolved, DomainError> {
    resolve(
        tx,
        named,
        None,
        "SELECT id, name, email AS detail, NULL::text AS alias FROM users \
         WHERE ($1::uuid IS NULL OR campus_id IS NULL OR campus_id = $1) ORDER BY name, id",
        |q| q.bind(campus),
    )
    .await
}

/// A department of the school: school-wide ones, and (in campus mode) the campus's own.
pub async fn department(
    tx: &mut TenantTx,
    campus: Option<Uuid>,
    named: &Named<rover_contracts::ids::DepartmentId>,
) -> Result<Resolved, DomainError> {
    resolve(
        tx,
        named,
        None,
        "SELECT d.id, d.name, coalesce(c.name || ' campus', 'school-wide') AS detail, \
                NULL::text AS alias FROM departments d \
         LEFT JOIN campuses c ON c.school_id = d.school_id AND c.id = d.campus_id \
         WHERE ($1::uuid IS NULL OR d.campus_id IS NULL OR d.campus_id = $1) ORDER BY d.name, d.id",
        |q| q.bind(campus),
    )
    .await
}

/// Whether the words name the current term ("this term", "current term", "current"): the
/// caller then takes the calendar's current term, as when no term is given.
pub fn means_current_term(named: &Named<rover_contracts::ids::TermId>) -> bool {
    matches!(
        words(named.said()).join(" ").as_str(),
        "this term" | "current term" | "the current term" | "current" | "this"
    )
}

/// A term of academic year `year`.
pub async fn term(
    tx: &mut TenantTx,
    year: Uuid,
    named: &Named<rover_contracts::ids::TermId>,
) -> Result<Resolved, DomainError> {
    resolve(
        tx,
        named,
        None,
        "SELECT id, name, to_char(starts_on, 'DD Mon') || ' to ' || to_char(ends_on, 'DD Mon YYYY') \
                AS detail, NULL::text AS alias FROM terms WHERE academic_year_id = $1 ORDER BY starts_on",
        |q| q.bind(year),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates(rows: &[(&str, &str)]) -> Vec<Candidate> {
        rows.iter()
            .map(|(name, detail)| Candidate {
                id: Uuid::new_v4(),
                name: (*name).to_owned(),
                detail: (*detail).to_owned(),
                alias: None,
            })
            .collect()
    }

    fn picked(said: &str, rows: &[Candidate]) -> Result<String, Unresolved> {
        pick("student", said, None, rows).map(|c| c.name.clone())
    }

    #[test]
    fn case_space_and_punctuation_do_not_matter() {
        let classes = candidates(&[("S1 Blue", "Naalya"), ("S1 Gold", "Kololo")]);
        for said in ["S1 Blue", "s1 blue", "  S1   BLUE ", "s1blue", "S1-Blue"] {
            assert_eq!(picked(said, &classes).unwrap(), "S1 Blue", "{said:?}");
        }
    }

    #[test]
    fn a_unique_word_or_beginning_counts() {
        let students = candidates(&[("Nakato Sarah", "S1 Blue"), ("Mugisha Brian", "S1 Blue")]);
        assert_eq!(picked("Nakato", &students).unwrap(), "Nakato Sarah");
        assert_eq!(picked("sarah nakato", &students).unwrap(), "Nakato Sarah");
        assert_eq!(picked("Mugi", &students).unwrap(), "Mugisha Brian");
        let subjects = candidates(&[("Mathematics", ""), ("Physics", ""), ("English", "")]);
        assert_eq!(picked("Maths", &subjects).unwrap(), "Mathematics");
        assert_eq!(picked("math", &subjects).unwrap(), "Mathematics");
        assert_eq!(picked("Eng", &subjects).unwrap(), "English");
        let pe = candidates(&[("Physical Education", ""), ("Physics", "")]);
        assert_eq!(picked("PE", &pe).unwrap(), "Physical Education");
    }

    #[test]
    fn two_fits_are_ambiguous_with_what_tells_them_apart() {
        let students = candidates(&[
            ("Nakato Sarah", "S1 Blue, KHS001"),
            ("Nakato Mary", "S2 Green, KHS016"),
        ]);
        let error = picked("Nakato", &students).unwrap_err();
        assert!(error.ambiguous);
        assert_eq!(
            error.choices,
            [
                "Nakato Sarah (S1 Blue, KHS001)",
                "Nakato Mary (S2 Green, KHS016)"
            ]
        );
        let ask = error.ask().unwrap();
        assert_eq!(ask.question, "Which student do you mean by \"Nakato\"?");
        assert!(error.to_string().contains("Nothing was changed"));
        // Every choice, said back, resolves to its own candidate.
        for (choice, name) in error.choices.iter().zip(["Nakato Sarah", "Nakato Mary"]) {
            assert_eq!(picked(choice, &students).unwrap(), name);
        }
    }

    #[test]
    fn an_exact_name_beats_a_longer_one_it_begins() {
        let classes = candidates(&[("S1", "Naalya"), ("S1 Blue", "Naalya")]);
        assert_eq!(picked("S1", &classes).unwrap(), "S1");
    }

    #[test]
    fn the_same_name_twice_is_told_apart_by_its_detail() {
        let students = candidates(&[
            ("Okello John", "S1 Blue, KHS004"),
            ("Okello John", "S2 Red, KHS019"),
        ]);
        assert!(picked("Okello John", &students).unwrap_err().ambiguous);
        assert_eq!(
            pick("student", "Okello John (S2 Red, KHS019)", None, &students)
                .unwrap()
                .detail,
            "S2 Red, KHS019"
        );
    }

    #[test]
    fn a_verb_read_as_a_name_is_not_a_match_but_a_suggestion() {
        // "Mark Mugisha and Achieng absent" → absent: ["Mark Mugisha", …]
        let students = candidates(&[
            ("Nakato Sarah", "S1 Blue, KHS001"),
            ("Mugisha Brian", "S1 Blue, KHS002"),
            ("Achieng Grace", "S1 Blue, KHS003"),
        ]);
        let error = pick("student", "Mark Mugisha", Some("in S1 Blue"), &students).unwrap_err();
        assert!(!error.ambiguous);
        assert_eq!(error.choices, ["Mugisha Brian (S1 Blue, KHS002)"]);
        assert_eq!(
            error.ask().unwrap().question,
            "I could not find a student called \"Mark Mugisha\" in S1 Blue. Did you mean this one?"
        );
    }

    #[test]
    fn a_misspelling_is_suggested_never_taken() {
        let students = candidates(&[("Nakato Sarah", "S1 Blue"), ("Namuli Esther", "S1 Blue")]);
        let error = picked("Nakatto", &students).unwrap_err();
        assert_eq!(error.choices, ["Nakato Sarah (S1 Blue)"]);
        let nothing = picked("Wasswa", &students).unwrap_err();
        assert!(nothing.choices.is_empty() && nothing.ask().is_none());
        assert_eq!(
            nothing.to_string(),
            "No student called \"Wasswa\" was found. Nothing was changed."
        );
    }

    #[test]
    fn suggestions_are_at_most_three() {
        let many = candidates(&[
            ("Ann A", ""),
            ("Ann B", ""),
            ("Ann C", ""),
            ("Ann D", ""),
            ("Bob", ""),
        ]);
        let error = picked("Anne Z", &many).unwrap_err();
        assert_eq!(error.choices.len(), MAX_SUGGESTIONS);
    }

    #[test]
    fn short_beginnings_do_not_count() {
        let students = candidates(&[("Nakato Sarah", "")]);
        assert!(picked("Na", &students).is_err());
        assert!(picked("", &students).is_err());
    }

    #[test]
    fn an_admission_number_is_exact() {
        let mut students = candidates(&[("Nakato Sarah", "S1 Blue")]);
        students[0].alias = Some("KHS-001".to_owned());
        assert_eq!(picked("khs001", &students).unwrap(), "Nakato Sarah");
    }
}

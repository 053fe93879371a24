//! Continuing a turn's stream after a worker died mid-turn.
//!
//! A redelivered turn is run again with its journal: recorded model answers and tool results are
//! replayed (re-emitting the events they emitted the first time) instead of being asked for again.
//! The client has already seen the events recorded before the crash, so the [`Continuation`] holds
//! those back: it walks the new events along the recorded ones and lets through only what the
//! client has not seen, numbered after the last recorded `seq`.
//!
//! Text is compared as text, not as chunks (a replayed answer arrives as one delta), so an answer
//! cut off mid-sentence continues where it stopped. A recorded subagent's events that a replayed
//! `task` result makes unnecessary are skipped over. Should the new run differ from the recorded
//! one (a model that answers differently the second time), everything from the first difference
//! on is passed through: the client sees the rest of the new run after what it already has.

use rover_contracts::wire::{TurnEvent, TurnEventKind};

/// Holds back the events a client has already seen.
#[derive(Debug)]
pub(crate) struct Continuation {
    recorded: Vec<TurnEvent>,
    /// The next recorded event to match.
    at: usize,
    /// Characters of the recorded `TextDelta` at `at` already matched.
    matched_chars: usize,
    /// Matching stopped (the recorded events ran out, or the runs differ).
    passing: bool,
    next_seq: u64,
}

impl Continuation {
    /// Continues after `recorded` (the turn's events so far, in `seq` order).
    pub(crate) fn after(recorded: Vec<TurnEvent>) -> Self {
        let next_seq = recorded.iter().map(|e| e.seq + 1).max().unwrap_or(0);
        Self {
            passing: recorded.is_empty(),
            recorded,
            at: 0,
            matched_chars: 0,
            next_seq,
        }
    }

    /// The events recorded before.
    pub(crate) fn recorded(&self) -> &[TurnEvent] {
        &self.recorded
    }

    /// Whether the turn had already sent `finish` (nothing is left to run).
    pub(crate) fn finished(&self) -> bool {
        self.recorded
            .iter()
            .any(|e| matches!(e.event, TurnEventKind::Finish { .. }))
    }

    /// The `seq` the next new event gets.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// What of `event` the client has not seen yet, numbered; `None` when it has seen all of it.
    pub(crate) fn admit(&mut self, mut event: TurnEvent) -> Option<TurnEvent> {
        if !self.passing {
            match self.matches(&event.subagent, &event.event) {
                Matched::Whole => return None,
                Matched::Remainder(rest) => {
                    self.passing = true;
                    if let TurnEventKind::TextDelta { delta, .. } = &mut event.event {
                        *delta = rest;
                    }
                }
                Matched::No => self.passing = true,
            }
        }
        event.seq = self.next_seq;
        self.next_seq += 1;
        Some(event)
    }

    fn matches(
        &mut self,
        subagent: &Option<rover_contracts::context::Subagent>,
        event: &TurnEventKind,
    ) -> Matched {
        loop {
            let Some(recorded) = self.recorded.get(self.at) else {
                return Matched::No;
            };
            // A replayed `task` result stands in for the subagent's recorded events.
            if recorded.subagent.is_some() && subagent.is_none() {
                self.at += 1;
                self.matched_chars = 0;
                continue;
            }
            if recorded.subagent != *subagent {
                return Matched::No;
            }
            return match (&recorded.event, event) {
                (
                    TurnEventKind::TextDelta {
                        id: seen_id,
                        delta: seen,
                    },
                    TurnEventKind::TextDelta { id, delta },
                ) if seen_id == id => self.match_text(delta),
                (seen, new) if seen == new => {
                    self.at += 1;
                    self.matched_chars = 0;
                    Matched::Whole
                }
                _ => Matched::No,
            };
        }
    }

    /// Matches `delta` against the recorded deltas of the same part from the current position.
    fn match_text(&mut self, delta: &str) -> Matched {
        let mut rest = delta;
        loop {
            let Some(TurnEvent {
                event: TurnEventKind::TextDelta { delta: seen, .. },
                ..
            }) = self.recorded.get(self.at)
            else {
                return if rest.is_empty() {
                    Matched::Whole
                } else {
                    Matched::Remainder(rest.to_owned())
                };
            };
            let unseen = &seen[self.matched_chars..];
            if let Some(after) = rest.strip_prefix(unseen) {
                // This recorded delta is fully covered; go on with the next one.
                self.at += 1;
                self.matched_chars = 0;
                rest = after;
                if rest.is_empty() {
                    return Matched::Whole;
                }
            } else if unseen.starts_with(rest) {
                self.matched_chars += rest.len();
                return Matched::Whole;
            } else {
                let common = unseen
                    .char_indices()
                    .zip(rest.chars())
                    .take_while(|((_, a), b)| a == b)
                    .last()
                    .map_or(0, |((i, a), _)| i + a.len_utf8());
                return Matched::Remainder(rest[common..].to_owned());
            }
        }
    }
}

enum Matched {
    /// The client has seen all of it.
    Whole,
    /// The client has seen the start of this text; this is the rest.
    Remainder(String),
    /// The runs differ from here on.
    No,
}

#[cfg(test)]
mod tests {
    use rover_contracts::context::Subagent;
    use rover_contracts::ids::TurnId;
    use rover_contracts::wire::FinishReason;

    use super::*;

    fn events(turn: TurnId, kinds: Vec<(Option<Subagent>, TurnEventKind)>) -> Vec<TurnEvent> {
        kinds
            .into_iter()
            .enumerate()
            .map(|(seq, (subagent, event))| TurnEvent {
                turn_id: turn,
                seq: seq as u64,
                subagent,
                event,
            })
            .collect()
    }

    fn delta(id: &str, text: &str) -> TurnEventKind {
        TurnEventKind::TextDelta {
            id: id.to_owned(),
            delta: text.to_owned(),
        }
    }

    fn text_of(events: &[TurnEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match &e.event {
                TurnEventKind::TextDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_text_cut_off_mid_word_continues_where_it_stopped() {
        let turn = TurnId::new();
        let start = TurnEventKind::Start {
            message_id: "m".into(),
            trace_id: None,
        };
        let text_start = TurnEventKind::TextStart {
            id: "0-text".into(),
        };
        let recorded = events(
            turn,
            vec![
                (None, start.clone()),
                (None, TurnEventKind::StartStep),
                (None, text_start.clone()),
                (None, delta("0-text", "Done — I cr")),
                (None, delta("0-text", "ea")),
            ],
        );
        let mut continuation = Continuation::after(recorded.clone());
        assert_eq!(continuation.next_seq(), 5);
        let rerun = events(
            turn,
            vec![
                (None, start),
                (None, TurnEventKind::StartStep),
                (None, text_start),
                (None, delta("0-text", "Done — I created the ")),
                (None, delta("0-text", "Sciences department.")),
                (
                    None,
                    TurnEventKind::TextEnd {
                        id: "0-text".into(),
                    },
                ),
                (
                    None,
                    TurnEventKind::Finish {
                        reason: FinishReason::Stop,
                        usage: None,
                        model: None,
                    },
                ),
            ],
        );
        let sent: Vec<TurnEvent> = rerun
            .into_iter()
            .filter_map(|e| continuation.admit(e))
            .collect();
        let seqs: Vec<u64> = sent.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [5, 6, 7, 8]);
        let mut whole = recorded.clone();
        whole.extend(sent);
        assert_eq!(text_of(&whole), "Done — I created the Sciences department.");
    }

    #[test]
    fn a_replayed_task_result_skips_the_subagents_recorded_events() {
        let turn = TurnId::new();
        let output = TurnEventKind::ToolOutputAvailable {
            tool_call_id: "0-task".into(),
            output: serde_json::json!({"data": "done"}),
        };
        let recorded = events(
            turn,
            vec![
                (None, TurnEventKind::StartStep),
                (Some(Subagent::ClassTeacher), TurnEventKind::StartStep),
                (Some(Subagent::ClassTeacher), delta("x", "roster")),
                (None, output.clone()),
            ],
        );
        let mut continuation = Continuation::after(recorded);
        assert!(
            continuation
                .admit(events(turn, vec![(None, TurnEventKind::StartStep)]).remove(0))
                .is_none()
        );
        assert!(
            continuation
                .admit(events(turn, vec![(None, output)]).remove(0))
                .is_none()
        );
        let next = continuation
            .admit(events(turn, vec![(None, TurnEventKind::FinishStep)]).remove(0))
            .expect("new");
        assert_eq!(next.seq, 4);
    }

    #[test]
    fn a_run_that_differs_passes_through_from_the_first_difference() {
        let turn = TurnId::new();
        let recorded = events(
            turn,
            vec![
                (None, TurnEventKind::TextStart { id: "t".into() }),
                (None, delta("t", "Hello wor")),
            ],
        );
        let mut continuation = Continuation::after(recorded);
        assert!(
            continuation
                .admit(
                    events(
                        turn,
                        vec![(None, TurnEventKind::TextStart { id: "t".into() })]
                    )
                    .remove(0)
                )
                .is_none()
        );
        let sent = continuation
            .admit(events(turn, vec![(None, delta("t", "Hello there"))]).remove(0))
            .expect("the different part is sent");
        assert_eq!(sent.event, delta("t", "there"));
        let after = continuation
            .admit(
                events(
                    turn,
                    vec![(None, TurnEventKind::TextEnd { id: "t".into() })],
                )
                .remove(0),
            )
            .expect("everything after a difference is sent");
        assert_eq!(after.seq, 3);
    }

    #[test]
    fn a_fresh_turn_passes_everything_from_zero() {
        let turn = TurnId::new();
        let mut continuation = Continuation::after(Vec::new());
        assert!(!continuation.finished());
        let sent = continuation
            .admit(events(turn, vec![(None, TurnEventKind::StartStep)]).remove(0))
            .unwrap();
        assert_eq!(sent.seq, 0);
    }
}

//! Chats as a Hub reads them back: a staff member's threads listed (newest activity first, keyset
//! pages, full-text search over titles and message text), one chat's turns with what was sent on
//! each and the events it streamed, renaming, deleting (everything the chat owns; token usage
//! stays, without content), an admin's erasure of one staff member's chats, feedback on a reply,
//! and the retention sweep.
//!
//! A chat is a thread the gateway opened for a client's chat id (`threads.chat_id`); the thread id
//! itself is derived from the user and that id, so nothing here can reach a colleague's chat.

use chrono::{DateTime, Utc};
use rover_contracts::ids::{CampusId, ThreadId, TurnId, UserId};
use serde_json::Value;
use sqlx::Row as _;

use rover_domain::{DomainError, TenantTx};

/// Where a chat stands, as the sidebar shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatStatus {
    /// Nothing is running or waiting on the staff member.
    Idle,
    /// A reply is queued or running.
    Running,
    /// A write waits for the staff member's approval.
    AwaitingApproval,
    /// A write waited for approval past its time, nobody answered, and nothing happened in the
    /// chat since: it was not run.
    ApprovalExpired,
    /// Rover asked the staff member a question (`ask_user`).
    AwaitingAnswer,
}

impl ChatStatus {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Running => "running",
            Self::AwaitingApproval => "awaiting_approval",
            Self::ApprovalExpired => "approval_expired",
            Self::AwaitingAnswer => "awaiting_answer",
        }
    }

    fn parse(name: &str) -> Self {
        match name {
            "running" => Self::Running,
            "awaiting_approval" => Self::AwaitingApproval,
            "approval_expired" => Self::ApprovalExpired,
            "awaiting_answer" => Self::AwaitingAnswer,
            _ => Self::Idle,
        }
    }
}

/// One chat of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct Chat {
    /// The thread.
    pub thread: ThreadId,
    /// The client's chat id.
    pub chat_id: String,
    /// Its title (from the first message until renamed).
    pub title: String,
    /// When it was opened.
    pub created_at: DateTime<Utc>,
    /// When a turn last opened or ended on it.
    pub last_activity_at: DateTime<Utc>,
    /// Where it stands.
    pub status: ChatStatus,
}

/// Where the next page of a list starts: after this chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The last listed chat's activity, in microseconds since the epoch (Postgres's precision).
    pub at_micros: i64,
    /// The last listed chat's thread.
    pub thread: uuid::Uuid,
}

impl Cursor {
    /// The cursor as an opaque token.
    #[must_use]
    pub fn encode(self) -> String {
        format!("{}.{}", self.at_micros, self.thread.simple())
    }

    /// The latest time a cursor may hold: the end of year 9999, in microseconds since the epoch.
    /// Postgres's `timestamptz` goes further, but no chat's activity will, and every time from
    /// the epoch to here is one Postgres and chrono both hold.
    pub const LATEST_MICROS: i64 = 253_402_300_799_999_999;

    /// A token from [`Cursor::encode`]; `None` when it is not one — including a time before the
    /// epoch or after [`Cursor::LATEST_MICROS`], which no listed chat has (and which Postgres
    /// would refuse to compare).
    #[must_use]
    pub fn decode(token: &str) -> Option<Self> {
        let (at, thread) = token.split_once('.')?;
        let at_micros: i64 = at.parse().ok()?;
        if !(0..=Self::LATEST_MICROS).contains(&at_micros) {
            return None;
        }
        Some(Self {
            at_micros,
            thread: uuid::Uuid::try_parse(thread).ok()?,
        })
    }

    /// The cursor's time.
    fn at(self) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_micros(self.at_micros).unwrap_or_default()
    }

    fn after(chat: &Chat) -> Self {
        Self {
            at_micros: chat.last_activity_at.timestamp_micros(),
            thread: chat.thread.as_uuid(),
        }
    }
}

/// Which page of which chats to list.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// At most this many chats (1–100).
    pub limit: u32,
    /// After this chat.
    pub cursor: Option<Cursor>,
    /// Only chats whose title or message text matches this web-search-style query.
    pub search: Option<String>,
    /// Only chats opened in this campus (the caller's campus scope); `None`: every chat.
    pub campus: Option<CampusId>,
}

/// The status of thread `t`, as SQL.
const STATUS: &str = "CASE \
    WHEN EXISTS (SELECT 1 FROM open_turns o WHERE o.school_id = t.school_id \
        AND o.thread_id = t.id AND o.expires_at > now()) THEN 'running' \
    WHEN EXISTS (SELECT 1 FROM approvals a WHERE a.school_id = t.school_id \
        AND a.thread_id = t.id AND a.state = 'pending' AND a.expires_at > now()) \
        THEN 'awaiting_approval' \
    WHEN EXISTS (SELECT 1 FROM approvals a WHERE a.school_id = t.school_id \
        AND a.thread_id = t.id AND a.expires_at <= now() AND a.expires_at > t.last_activity_at \
        AND (a.state = 'pending' OR (a.state = 'expired' AND a.decided_at >= a.expires_at))) \
        THEN 'approval_expired' \
    WHEN coalesce((SELECT jsonb_path_exists(c.message, \
        '$.tool_calls[*] ? (@.function.name == \"ask_user\")') FROM conversation_log c \
        WHERE c.school_id = t.school_id AND c.thread_id = t.id \
        ORDER BY c.position DESC LIMIT 1), false) THEN 'awaiting_answer' \
    ELSE 'idle' END";

/// The chats matching a search, from the two full-text indexes (titles, message text): through
/// `rover_search_threads`, because under row-level security the planner may not use a full-text
/// index (see migration 0036).
const MATCHING: &str = "SELECT rover_search_threads($1, $6)";

fn select(filter: &str) -> String {
    format!(
        "SELECT t.id, t.chat_id, coalesce(t.title, ''), t.created_at, t.last_activity_at, \
         {STATUS} AS status FROM threads t \
         WHERE t.user_id = $1 AND t.chat_id IS NOT NULL {filter}"
    )
}

fn chat(row: &sqlx::postgres::PgRow) -> Result<Chat, sqlx::Error> {
    Ok(Chat {
        thread: ThreadId::from_uuid(row.try_get(0)?),
        chat_id: row.try_get(1)?,
        title: row.try_get(2)?,
        created_at: row.try_get(3)?,
        last_activity_at: row.try_get(4)?,
        status: ChatStatus::parse(row.try_get(5)?),
    })
}

/// The SQL [`list`] runs for `query` (the search's union only when there is a search).
#[must_use]
pub fn list_sql(query: &ListQuery) -> String {
    let search = if query.search.is_some() {
        format!("AND t.id IN ({MATCHING})")
    } else {
        String::new()
    };
    select(&format!(
        "AND ($2::uuid IS NULL OR t.campus_id = $2) \
         AND ($3::timestamptz IS NULL OR (t.last_activity_at, t.id) < ($3, $4)) {search} \
         ORDER BY t.last_activity_at DESC, t.id DESC LIMIT $5"
    ))
}

/// A page of `user`'s chats, newest activity first, and where the next page starts (`None` on
/// the last page).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", limit = query.limit, search = query.search.is_some()))]
pub async fn list(
    tx: &mut TenantTx,
    user: UserId,
    query: &ListQuery,
) -> Result<(Vec<Chat>, Option<Cursor>), DomainError> {
    let limit = query.limit.clamp(1, 100);
    let at = query.cursor.map(Cursor::at);
    let rows = sqlx::query(&list_sql(query))
        .bind(user.as_uuid())
        .bind(query.campus.map(|c| c.as_uuid()))
        .bind(at)
        .bind(query.cursor.map(|c| c.thread))
        .bind(i64::from(limit) + 1)
        .bind(query.search.as_deref().unwrap_or_default())
        .fetch_all(tx.connection())
        .await?;
    let mut chats = rows.iter().map(chat).collect::<Result<Vec<_>, _>>()?;
    let more = chats.len() > limit as usize;
    chats.truncate(limit as usize);
    let next = if more {
        chats.last().map(Cursor::after)
    } else {
        None
    };
    Ok((chats, next))
}

/// `user`'s chat on `thread`; `None` when there is none (or it is not theirs).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn find(
    tx: &mut TenantTx,
    user: UserId,
    thread: ThreadId,
) -> Result<Option<Chat>, DomainError> {
    let row = sqlx::query(&select("AND t.id = $2"))
        .bind(user.as_uuid())
        .bind(thread.as_uuid())
        .fetch_optional(tx.connection())
        .await?;
    Ok(row.as_ref().map(chat).transpose()?)
}

/// Renames `user`'s chat on `thread`; `None` when there is none.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn rename(
    tx: &mut TenantTx,
    user: UserId,
    thread: ThreadId,
    title: &str,
) -> Result<Option<Chat>, DomainError> {
    let renamed = sqlx::query(
        "UPDATE threads SET title = $3 WHERE id = $2 AND user_id = $1 AND chat_id IS NOT NULL",
    )
    .bind(user.as_uuid())
    .bind(thread.as_uuid())
    .bind(title)
    .execute(tx.connection())
    .await?;
    if renamed.rows_affected() == 0 {
        return Ok(None);
    }
    find(tx, user, thread).await
}

/// What a chat POST opened a turn with.
#[derive(Debug, Clone)]
pub struct Opening<'a> {
    /// The client's chat id.
    pub chat_id: &'a str,
    /// The campus the chat runs in (kept from its first turn).
    pub campus: Option<CampusId>,
    /// The title a new chat gets.
    pub title: Option<String>,
    /// The staff member's message as the client sent it, when the turn has one.
    pub sent: Option<Value>,
    /// The answers a continuation carried (approvals, an `ask_user` answer).
    pub answers: Option<Value>,
    /// The trace the POST ran in.
    pub trace_id: Option<String>,
}

/// Records that `turn` opened on `thread`, with what was sent: it becomes the thread's current
/// turn (what `GET /api/chat/{id}/stream` resumes), the chat's activity moves, a new chat takes its
/// id, campus and title.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread, turn_id = %turn))]
pub async fn record_turn(
    tx: &mut TenantTx,
    thread: ThreadId,
    turn: TurnId,
    opening: &Opening<'_>,
) -> Result<(), DomainError> {
    let school = tx.school_id().as_uuid();
    sqlx::query(
        "WITH t AS (UPDATE threads SET last_turn_id = $6, last_activity_at = now(), \
             chat_id = coalesce(chat_id, $3), \
             campus_id = CASE WHEN chat_id IS NULL THEN $4 ELSE campus_id END, \
             title = coalesce(title, $5) \
           WHERE id = $2 RETURNING id) \
         INSERT INTO chat_turns (school_id, thread_id, turn_id, sent, answers, trace_id) \
         SELECT $1, t.id, $6, $7, $8, $9 FROM t",
    )
    .bind(school)
    .bind(thread.as_uuid())
    .bind(opening.chat_id)
    .bind(opening.campus.map(|c| c.as_uuid()))
    .bind(opening.title.as_deref())
    .bind(turn.as_uuid())
    .bind(opening.sent.as_ref())
    .bind(opening.answers.as_ref())
    .bind(opening.trace_id.as_deref())
    .execute(tx.connection())
    .await?;
    Ok(())
}

/// One turn of a chat, as its POST opened it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTurn {
    /// The turn.
    pub turn: TurnId,
    /// The staff member's message as sent, if the turn had one.
    pub sent: Option<Value>,
    /// The answers a continuation carried.
    pub answers: Option<Value>,
    /// The trace the POST ran in.
    pub trace_id: Option<String>,
    /// The turn's recorded events (`TurnEvent`s), in order.
    pub events: Vec<Value>,
}

/// A `chat_turns` row: turn, sent, answers, trace id.
type OpenedRow = (uuid::Uuid, Option<Value>, Option<Value>, Option<String>);

/// Every turn of `thread`, in the order they were opened, each with its recorded events.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn turns(tx: &mut TenantTx, thread: ThreadId) -> Result<Vec<ChatTurn>, DomainError> {
    let opened: Vec<OpenedRow> = sqlx::query_as(
        "SELECT turn_id, sent, answers, trace_id FROM chat_turns WHERE thread_id = $1 \
         ORDER BY position",
    )
    .bind(thread.as_uuid())
    .fetch_all(tx.connection())
    .await?;
    let ids: Vec<uuid::Uuid> = opened.iter().map(|(turn, ..)| *turn).collect();
    let events: Vec<(uuid::Uuid, Value)> = sqlx::query_as(
        "SELECT turn_id, payload FROM turn_events WHERE turn_id = ANY($1) ORDER BY turn_id, seq",
    )
    .bind(&ids)
    .fetch_all(tx.connection())
    .await?;
    let mut by_turn: std::collections::HashMap<uuid::Uuid, Vec<Value>> =
        std::collections::HashMap::new();
    for (turn, payload) in events {
        by_turn.entry(turn).or_default().push(payload);
    }
    Ok(opened
        .into_iter()
        .map(|(turn, sent, answers, trace_id)| ChatTurn {
            turn: TurnId::from_uuid(turn),
            sent,
            answers,
            trace_id,
            events: by_turn.remove(&turn).unwrap_or_default(),
        })
        .collect())
}

/// What deleting a chat removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    /// The turns the chat had.
    pub turns: i64,
}

/// Deletes `thread` and everything it owns (history, steps, events, artifacts, approvals, open
/// turns, feedback); the token usage of its turns stays, carrying no content. `None` when it is
/// not `user`'s chat.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn delete(
    tx: &mut TenantTx,
    user: UserId,
    thread: ThreadId,
) -> Result<Option<Deleted>, DomainError> {
    let turns: Option<i64> = sqlx::query_scalar(
        "WITH gone AS (DELETE FROM threads WHERE id = $2 AND user_id = $1 RETURNING id) \
         SELECT (SELECT count(*) FROM chat_turns c WHERE c.thread_id = gone.id) FROM gone",
    )
    .bind(user.as_uuid())
    .bind(thread.as_uuid())
    .fetch_optional(tx.connection())
    .await?;
    Ok(turns.map(|turns| Deleted { turns }))
}

/// Every thread of `user` (their chats and any thread without a chat id), oldest first.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn threads_of(tx: &mut TenantTx, user: UserId) -> Result<Vec<ThreadId>, DomainError> {
    let ids: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT id FROM threads WHERE user_id = $1 ORDER BY created_at, id")
            .bind(user.as_uuid())
            .fetch_all(tx.connection())
            .await?;
    Ok(ids.into_iter().map(ThreadId::from_uuid).collect())
}

/// Whether `staff` is a user of this school within `campus` (a campus scope reaches only that
/// campus's staff; `None`: the whole school).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn staff_in_scope(
    tx: &mut TenantTx,
    staff: UserId,
    campus: Option<CampusId>,
) -> Result<bool, DomainError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM users WHERE id = $1 \
         AND ($2::uuid IS NULL OR campus_id = $2))",
    )
    .bind(staff.as_uuid())
    .bind(campus.map(|c| c.as_uuid()))
    .fetch_one(tx.connection())
    .await?)
}

/// Erases every thread of `staff` (chats and all they own); their running turns are asked to
/// stop. Returns how many threads went, and the turns to tell the workers about once committed.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn erase(tx: &mut TenantTx, staff: UserId) -> Result<(u64, Vec<TurnId>), DomainError> {
    let stopping = crate::open_turns::request_stop_of_user(tx, staff).await?;
    let erased = sqlx::query("DELETE FROM threads WHERE user_id = $1")
        .bind(staff.as_uuid())
        .execute(tx.connection())
        .await?
        .rows_affected();
    Ok((erased, stopping))
}

/// `user`'s chats, oldest first, for an export.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn all(tx: &mut TenantTx, user: UserId) -> Result<Vec<Chat>, DomainError> {
    let rows = sqlx::query(&select("ORDER BY t.created_at, t.id"))
        .bind(user.as_uuid())
        .fetch_all(tx.connection())
        .await?;
    Ok(rows.iter().map(chat).collect::<Result<Vec<_>, _>>()?)
}

/// A staff member's rating of one reply.
#[derive(Debug, Clone)]
pub struct Feedback<'a> {
    /// The assistant message rated.
    pub message_id: &'a str,
    /// `true`: up; `false`: down.
    pub up: bool,
    /// An optional comment.
    pub comment: Option<&'a str>,
}

/// The turn a rated reply came from, and its trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rated {
    /// The (last) turn that wrote the message.
    pub turn: TurnId,
    /// Its trace, when known.
    pub trace_id: Option<String>,
}

/// Keeps `user`'s rating of the reply `feedback.message_id` in `thread` (a second rating of the
/// same reply replaces the first), with the turn that wrote it and its trace. `None` when the
/// thread has no such reply.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn rate(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
    feedback: &Feedback<'_>,
) -> Result<Option<Rated>, DomainError> {
    let school = tx.school_id().as_uuid();
    let rated: Option<(uuid::Uuid, Option<String>)> = sqlx::query_as(
        "WITH reply AS ( \
           SELECT e.turn_id, coalesce(e.payload->'event'->>'traceId', c.trace_id) AS trace_id \
           FROM chat_turns c JOIN turn_events e ON e.turn_id = c.turn_id AND e.seq = 0 \
           WHERE c.thread_id = $2 AND e.payload->'event'->>'type' = 'start' \
             AND e.payload->'event'->>'messageId' = $4 \
           ORDER BY c.position DESC LIMIT 1) \
         INSERT INTO chat_feedback (school_id, thread_id, message_id, turn_id, user_id, rating, \
             comment, trace_id) \
         SELECT $1, $2, $4, reply.turn_id, $3, $5, $6, reply.trace_id FROM reply \
         ON CONFLICT (school_id, thread_id, message_id) DO UPDATE SET turn_id = excluded.turn_id, \
             rating = excluded.rating, comment = excluded.comment, trace_id = excluded.trace_id, \
             created_at = now() \
         RETURNING turn_id, trace_id",
    )
    .bind(school)
    .bind(thread.as_uuid())
    .bind(user.as_uuid())
    .bind(feedback.message_id)
    .bind(if feedback.up { "up" } else { "down" })
    .bind(feedback.comment)
    .fetch_optional(tx.connection())
    .await?;
    Ok(rated.map(|(turn, trace_id)| Rated {
        turn: TurnId::from_uuid(turn),
        trace_id,
    }))
}

/// `user`'s ratings of the replies in `thread`: (message id, `up`/`down`, comment).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn ratings(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
) -> Result<Vec<(String, String, Option<String>)>, DomainError> {
    Ok(sqlx::query_as(
        "SELECT message_id, rating, comment FROM chat_feedback \
         WHERE thread_id = $1 AND user_id = $2 ORDER BY created_at",
    )
    .bind(thread.as_uuid())
    .bind(user.as_uuid())
    .fetch_all(tx.connection())
    .await?)
}

/// How many chats one sweep deletes per school at most, so a first sweep over years of chats
/// holds no long transaction; the next sweep takes the rest.
pub const SWEEP_BATCH: i64 = 500;

/// Deletes `school`'s chats idle for longer than `keep_days` (none with a turn open), at most
/// [`SWEEP_BATCH`]; rows another sweeper holds are skipped, so every replica may sweep at once.
/// Returns how many were deleted.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", keep_days))]
pub async fn sweep_school(tx: &mut TenantTx, keep_days: i32) -> Result<u64, DomainError> {
    let deleted = sqlx::query(
        "DELETE FROM threads WHERE id IN ( \
           SELECT t.id FROM threads t \
           WHERE t.last_activity_at < now() - make_interval(days => $1) \
             AND NOT EXISTS (SELECT 1 FROM open_turns o WHERE o.school_id = t.school_id \
                 AND o.thread_id = t.id AND o.expires_at > now()) \
           ORDER BY t.last_activity_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
    )
    .bind(keep_days)
    .bind(SWEEP_BATCH)
    .execute(tx.connection())
    .await?;
    Ok(deleted.rows_affected())
}

/// Forgets deleted-thread ids older than `older_than` (every school's): by then no turn identity
/// issued before the deletion is alive, so no queued turn can need the tombstone.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn forget_deleted(
    pool: &sqlx::PgPool,
    older_than: std::time::Duration,
) -> Result<i64, DomainError> {
    let secs = f64::from(u32::try_from(older_than.as_secs()).unwrap_or(u32::MAX));
    Ok(
        sqlx::query_scalar("SELECT rover_forget_deleted_threads(make_interval(secs => $1))")
            .bind(secs)
            .fetch_one(pool)
            .await?,
    )
}

/// The schools that keep chats for a limited time, and for how many days.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn retention(pool: &sqlx::PgPool) -> Result<Vec<(uuid::Uuid, i32)>, DomainError> {
    Ok(
        sqlx::query_as("SELECT school_id, keep_days FROM rover_chat_retention()")
            .fetch_all(pool)
            .await?,
    )
}

/// A title for a new chat from its first message: the first line, whitespace collapsed, cut at
/// a word within 60 characters (with `…`), without the control and invisible characters a title
/// may not hold (`rover_domain::text`); `None` when the message has no text.
#[must_use]
pub fn title_from(text: &str) -> Option<String> {
    const MAX: usize = 60;
    let text = rover_domain::text::without_hidden(text);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let whole = words.join(" ");
    if whole.chars().count() <= MAX {
        return Some(whole);
    }
    let mut title = String::new();
    for word in words {
        let next = if title.is_empty() {
            word.to_owned()
        } else {
            format!("{title} {word}")
        };
        if next.chars().count() > MAX - 1 {
            break;
        }
        title = next;
    }
    if title.is_empty() {
        title = whole.chars().take(MAX - 1).collect();
    }
    Some(format!("{title}…"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_the_first_line_cut_at_a_word() {
        assert_eq!(
            title_from("\n  How many   students\ndo we have?"),
            Some("How many students".to_owned())
        );
        let long = "Please record attendance for S1 Blue today: everyone present except Nakato";
        let title = title_from(long).unwrap();
        assert_eq!(
            title,
            "Please record attendance for S1 Blue today: everyone…"
        );
        assert!(title.chars().count() <= 60);
        let word = "x".repeat(100);
        assert_eq!(title_from(&word).unwrap().chars().count(), 60);
        assert_eq!(title_from("  \n "), None);
        // What a renamed title may not hold, a title taken from the message does not keep.
        let planted = title_from("Sci\u{200B}ences\u{202E} \u{1b}[2Jreport\0 now").unwrap();
        assert_eq!(planted, "Sciences [2Jreport now");
        assert!(rover_domain::text::clean_text(&planted, "title", 200).is_ok());
        assert_eq!(
            title_from("\u{200B}\u{2066}\n\0 next line"),
            Some("next line".to_owned())
        );
    }

    #[test]
    fn a_cursor_survives_its_encoding_and_nothing_else_decodes() {
        let cursor = Cursor {
            at_micros: 1_764_800_000_123_456,
            thread: uuid::Uuid::from_u128(7),
        };
        assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
        for bad in ["", "1", "x.y", "1.not-a-uuid", ".", "12.3"] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
        // A time outside what a chat's activity can be is no cursor (Postgres refuses to compare
        // a time that far out, and the list answered 500).
        let thread = uuid::Uuid::from_u128(7).simple();
        for far in [
            "-300000000000000000".to_owned(),
            "-1".to_owned(),
            (Cursor::LATEST_MICROS + 1).to_string(),
            i64::MAX.to_string(),
            i64::MIN.to_string(),
        ] {
            assert_eq!(Cursor::decode(&format!("{far}.{thread}")), None, "{far}");
        }
        for edge in [0, Cursor::LATEST_MICROS] {
            let cursor = Cursor::decode(&format!("{edge}.{thread}")).unwrap();
            assert_eq!(cursor.at().timestamp_micros(), edge);
        }
    }
}

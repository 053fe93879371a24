//! One tool call's database work in as few round trips, and as little planning, as it can take:
//! [`begin_call`] opens the tenant transaction, checks the school, reads the school's policy
//! version (and the live policy rows only when the version moved since the caller last read them)
//! and (for a write) locks the call id, reads its stored reply and its approval — all in **one**
//! round trip; [`commit_write`] records the audit row and the inbox row and commits in another.
//! So a read is two round trips before its answer (this and the query), and a write three (this,
//! the write, [`commit_write`]). Both run PL/pgSQL functions (migration `0039_call_functions.sql`)
//! whose statements Postgres plans once per connection. A read whose whole work is one query
//! ([`OneTripRead`]) can take one: [`read_in_one_trip`] runs the opening and the query as one
//! prepared statement.

use rover_authz::{PolicyRow, RoleAssignment};
use rover_contracts::ids::{SchoolId, ThreadId, ToolCallId, TurnId, UserId};
use serde_json::Value;
use sqlx::Row as _;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use crate::audit::AuditEntry;
use crate::policy::{AuthzRow, from_rows};
use crate::pool::{Connections, Lease};
use crate::tenant::bypass_refused;
use crate::{DomainError, TenantTx};

/// What [`begin_call`] reads besides opening the transaction.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallReads<'a> {
    /// Read the school's policy version, and its policy rows and role assignments unless the
    /// version is still `policy_cached` (a policy-gated tool).
    pub policy: bool,
    /// The policy version the caller last read the rows at: the rows are read again only when
    /// the school's version differs (`policy_versions`, bumped by trigger in the transaction that
    /// changes a row), so a change is seen on the very next call.
    pub policy_cached: Option<i64>,
    /// Lock this call id for the transaction and read its stored reply (a write).
    pub inbox: Option<&'a ToolCallId>,
    /// Read whether this write needs approval, and whether it has one (a write).
    pub approval: Option<ApprovalRead<'a>>,
}

/// A write about to run, as its approval is looked up: the school's policy for the tool, and an
/// approved row bound to this very call — the turn it was given to, the call id, the exact input,
/// the staff member and the chat.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRead<'a> {
    /// The tool's name (the policy's key).
    pub tool: &'a str,
    /// The model's call id (the approval row's `call_id`: the wire id without its turn).
    pub call_id: &'a str,
    /// The turn running the call: the only one an approval may be consumed by.
    pub turn: TurnId,
    /// The chat.
    pub thread: ThreadId,
    /// The staff member.
    pub user: UserId,
    /// The arguments, exactly as they will run.
    pub input: &'a Value,
}

/// A write's approval, as read with the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalStatus {
    /// The school's policy asks for approval of this tool (its row, else `*`, else yes).
    pub needed: bool,
    /// An approved row is bound to this very call, turn, input, user and chat.
    pub approved: bool,
}

/// A stored reply, with who the call ran for: it may be returned only to the same actor and
/// event.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReply {
    /// The reply the first run sent.
    pub reply: Value,
    /// The tool event the call ran as.
    pub event: String,
    /// The user the call ran as (`None` for rows stored before actors were recorded).
    pub actor: Option<UserId>,
}

/// An open call transaction and what was read with it.
#[derive(Debug)]
pub struct CallStart {
    /// The tenant transaction the call runs in.
    pub tx: TenantTx,
    /// Whether the school exists (row-level security shows only its own row).
    pub school_exists: bool,
    /// The live policy rows and role assignments, if asked for and the version moved from
    /// `policy_cached` (else the caller's rows of that version are still the live ones).
    pub authz: Option<(Vec<PolicyRow>, Vec<RoleAssignment>)>,
    /// The school's policy version, if asked for.
    pub policy_version: Option<i64>,
    /// The call id's stored reply, if asked for and the call already ran.
    pub stored: Option<StoredReply>,
    /// The write's approval, if asked for.
    pub approval: Option<ApprovalStatus>,
}

/// Opens the tenant transaction of a tool call and reads what the call needs before it runs, in
/// one round trip: `BEGIN`, then `rover_open_call(…)` (migration `0039_call_functions.sql`), which
/// sets `app.school_id` for the transaction, takes a write's call-id lock (so concurrent deliveries
/// of one call run one after the other), and returns one context row — whether the role bypasses
/// row-level security (refused), whether the school exists, the policy version, a write's approval
/// and stored reply — then the policy rows when the version moved. The function's statements are
/// planned once per connection; the query text is only the call, its arguments literals.
///
/// Every value written into the SQL is a parsed UUID, a number, or hex decoded by Postgres, so
/// nothing a caller sent is interpreted as SQL. A connection that turns out dead on this first use
/// (the server restarted since it was last used: the pool does not check connections with a round
/// trip of their own, see [`crate::pool`]) is replaced once, the idle ones that died with it
/// dropped.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", school_id = %school_id))]
pub async fn begin_call(
    pool: &impl Connections,
    school_id: SchoolId,
    reads: CallReads<'_>,
) -> Result<CallStart, DomainError> {
    let sql = call_sql(school_id, reads);
    let opened = match TenantTx::open(pool.lease().await?, school_id, sql.clone()).await {
        Err(DomainError::Database(error)) if connection_lost(&error) => {
            tracing::info!(%error, "a pooled connection was dead; opening the call on a new one");
            pool.discard_idle();
            TenantTx::open(pool.lease().await?, school_id, sql).await
        }
        opened => opened,
    };
    let (tx, rows) = opened?;
    let mut context = None;
    let mut authz_rows: Vec<AuthzRow> = Vec::new();
    for row in rows {
        match row.try_get::<Option<bool>, _>("is_policy")? {
            None => context = Some(row),
            Some(is_policy) => authz_rows.push((
                is_policy,
                row.try_get("role")?,
                row.try_get("action")?,
                row.try_get("subject")?,
                row.try_get("user_id")?,
            )),
        }
    }
    let context = context.ok_or_else(|| {
        DomainError::Database(sqlx::Error::Protocol(
            "the call's opening query returned no context row".into(),
        ))
    })?;
    if context.try_get::<bool, _>("bypasses_rls")? {
        return Err(bypass_refused());
    }
    let policy_version = match reads.policy {
        true => Some(context.try_get::<i64, _>("policy_version")?),
        false => None,
    };
    let stored = match reads.inbox {
        Some(_) => stored_reply(&context)?,
        None => None,
    };
    let approval = match reads.approval {
        Some(_) => Some(ApprovalStatus {
            needed: context
                .try_get::<Option<String>, _>("approval_mode")?
                .as_deref()
                != Some("never"),
            approved: context.try_get("approved")?,
        }),
        None => None,
    };
    // Rows came: the version moved (by the time they were read). None came: unchanged — or the
    // school has no rows at all, which only a moved version can tell.
    let moved = !authz_rows.is_empty()
        || (policy_version.is_some() && policy_version != reads.policy_cached);
    Ok(CallStart {
        tx,
        school_exists: context.try_get("school_exists")?,
        authz: (reads.policy && moved)
            .then(|| from_rows(authz_rows))
            .transpose()?,
        policy_version,
        stored,
        approval,
    })
}

/// A read whose whole database work is one query, ready to travel with the opening in
/// [`read_in_one_trip`]: the query — a call of one of the functions of migration
/// `0041_one_trip_reads.sql`, its parameters numbered from `$3` — its arguments, and how to
/// turn its rows into the answer.
pub struct OneTripRead<T> {
    sql: String,
    args: Vec<ReadArg>,
    decode: Box<dyn FnOnce(Vec<PgRow>) -> Result<T, DomainError> + Send>,
}

/// An argument of a [`OneTripRead`]'s query, bound as a parameter.
#[derive(Debug, Clone)]
pub(crate) enum ReadArg {
    /// A `uuid` (`NULL` when `None`).
    Uuid(Option<Uuid>),
    /// A `bigint`.
    BigInt(i64),
    /// A `text[]`.
    Texts(Vec<String>),
}

/// The first parameter a [`OneTripRead`]'s query may use (`$1` and `$2` are the opening's).
const FIRST_READ_PARAMETER: usize = 3;

impl<T: 'static> OneTripRead<T> {
    /// `function` applied to `args`: `SELECT <columns> FROM rover_list_…`, less its argument list.
    pub(crate) fn call(
        function: &str,
        args: Vec<ReadArg>,
        decode: impl FnOnce(Vec<PgRow>) -> Result<T, DomainError> + Send + 'static,
    ) -> Self {
        let parameters = (FIRST_READ_PARAMETER..FIRST_READ_PARAMETER + args.len())
            .map(|n| format!("${n}"))
            .collect::<Vec<_>>()
            .join(", ");
        Self {
            sql: format!("{function}({parameters})"),
            args,
            decode: Box::new(decode),
        }
    }

    /// The same read, its answer passed through `then`.
    pub fn then<U>(
        self,
        then: impl FnOnce(T) -> Result<U, DomainError> + Send + 'static,
    ) -> OneTripRead<U> {
        let decode = self.decode;
        OneTripRead {
            sql: self.sql,
            args: self.args,
            decode: Box::new(move |rows| decode(rows).and_then(then)),
        }
    }
}

#[cfg(feature = "test-support")]
impl OneTripRead<Vec<PgRow>> {
    /// Any query, without parameters, as a one-trip read, its rows as they come (tests only:
    /// `sql` is trusted).
    pub fn statement_for_tests(sql: &str) -> Self {
        Self {
            sql: sql.to_owned(),
            args: Vec::new(),
            decode: Box::new(Ok),
        }
    }
}

impl<T> std::fmt::Debug for OneTripRead<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneTripRead")
            .field("sql", &self.sql)
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

/// Runs a policy-gated read in **one** round trip, as one prepared statement (migrations
/// `0042_prepared_one_trip_reads.sql`, `0043_lean_one_trip_reads.sql`, where the read's SQL
/// function is inlined into it): `rover_open_read` refuses a role row-level security does
/// not bind, makes the transaction read-only, sets the school and reads the policy version; the
/// read's query runs after it, only when its answer will count. One statement is one implicit
/// transaction, read-only, that ends with it, so nothing is left to roll back and
/// `app.school_id` is gone with it. The statement is parsed and planned once per connection.
///
/// The caller has authorised the call on the policy rows of version `policy_cached`; the answer
/// counts only if that is still the school's live version, read in the same transaction as the
/// query. `Ok(None)` — the version moved, or the school does not exist — says: take the two-step
/// path ([`begin_call`]), which reads the live rows (a revoked permission is refused on the very
/// next call) or reports the missing school; the read's query is not run.
///
/// A connection found dead on this first use is replaced once, as in [`begin_call`].
///
/// It opens no span of its own: its one caller's span (the tool server's
/// `rover.toolserver.one_trip`) times exactly this statement with the same fields, and every span
/// costs the tool server a share of each read (decision 0020).
pub async fn read_in_one_trip<T>(
    pool: &impl Connections,
    school_id: SchoolId,
    policy_cached: i64,
    read: OneTripRead<T>,
) -> Result<Option<T>, DomainError> {
    let sql = format!(
        "SELECT o.bypasses_rls, o.school_exists, o.policy_version, o.live, q.* \
         FROM rover_open_read($1, $2) o \
         LEFT JOIN LATERAL (SELECT true AS rover_row, r.* FROM ({}) r WHERE o.live OFFSET 0) q \
         ON true",
        read.sql
    );
    let statement = || {
        read.args.iter().fold(
            sqlx::query(&sql)
                .bind(school_id.as_uuid())
                .bind(policy_cached),
            |query, arg| match arg {
                ReadArg::Uuid(id) => query.bind(*id),
                ReadArg::BigInt(n) => query.bind(*n),
                ReadArg::Texts(texts) => query.bind(texts.as_slice()),
            },
        )
    };
    let rows = match one_statement(pool.lease().await?, statement()).await {
        Err(error) if connection_lost(&error) => {
            tracing::info!(%error, "a pooled connection was dead; reading on a new one");
            pool.discard_idle();
            one_statement(pool.lease().await?, statement()).await
        }
        rows => rows,
    }?;
    let context = rows.first().ok_or_else(|| {
        DomainError::Database(sqlx::Error::Protocol(
            "a one-trip read returned no row".into(),
        ))
    })?;
    if context.try_get::<bool, _>("bypasses_rls")? {
        return Err(bypass_refused());
    }
    if !context.try_get::<bool, _>("live")? {
        return Ok(None);
    }
    // With no row of its own, the read still answers the opening's one row, its columns NULL.
    let rows = match context.try_get::<Option<bool>, _>("rover_row")? {
        Some(true) => rows,
        _ => Vec::new(),
    };
    (read.decode)(rows).map(Some)
}

/// Runs one statement on `conn` and returns its rows. The connection goes back only once the
/// server has answered (the statement's implicit transaction over): dropped while waiting, or
/// on an error, it is closed.
async fn one_statement<'q>(
    mut conn: Lease,
    statement: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
) -> Result<Vec<PgRow>, sqlx::Error> {
    conn.unsettled();
    let rows = statement.fetch_all(&mut *conn).await?;
    conn.settled();
    Ok(rows)
}

/// Whether `error` says the connection itself is gone: its socket failed, or the server ended
/// the session (shutdown, restart, an administrator's terminate: SQLSTATE class 57P, or 08 for
/// a connection exception).
fn connection_lost(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|code| code.starts_with("57P") || code.starts_with("08")),
        _ => false,
    }
}

fn stored_reply(context: &PgRow) -> Result<Option<StoredReply>, DomainError> {
    let Some(reply) = context.try_get::<Option<Value>, _>("stored_reply")? else {
        return Ok(None);
    };
    Ok(Some(StoredReply {
        reply,
        event: context.try_get("stored_event")?,
        actor: context
            .try_get::<Option<Uuid>, _>("stored_actor")?
            .map(UserId::from_uuid),
    }))
}

/// Text as a SQL expression: hex in the SQL, decoded by Postgres, so nothing a caller sent is
/// read as SQL.
///
/// `COLLATE "default"`: `convert_from`'s result takes the collation of its `name` argument, `"C"`,
/// and a PL/pgSQL function runs with the collation of its arguments — so without it every text
/// comparison inside `rover_open_call` was a `"C"` comparison that the default-collation indexes
/// cannot serve: each write's stored-reply lookup read the school's whole inbox, a cost that grew
/// with every write the school had ever made.
fn text_sql(text: &str) -> String {
    const BEFORE: &str = "convert_from(decode('";
    const AFTER: &str = "', 'hex'), 'UTF8') COLLATE \"default\"";
    // A write's reply and its before and after are written this way, a few hundred bytes to a
    // few KB each: two digits per byte from a table, bytes copied rather than `char`s pushed.
    let mut hex = String::with_capacity(BEFORE.len() + 2 * text.len() + AFTER.len());
    hex.push_str(BEFORE);
    let mut digits = [0_u8; 128];
    for chunk in text.as_bytes().chunks(digits.len() / 2) {
        for (pair, &byte) in digits.chunks_exact_mut(2).zip(chunk) {
            pair.copy_from_slice(&HEX_DIGITS[usize::from(byte)]);
        }
        hex.push_str(
            std::str::from_utf8(&digits[..2 * chunk.len()]).expect("hex digits are ASCII"),
        );
    }
    hex.push_str(AFTER);
    hex
}

/// Each byte's two lowercase hex digits.
const HEX_DIGITS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut table = [[0_u8; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0x0f]];
        byte += 1;
    }
    table
};

/// JSON text as a SQL `jsonb` expression (the text as [`text_sql`] writes it, cast).
fn jsonb_sql(json: &str) -> String {
    format!("({})::jsonb", text_sql(json))
}

/// A UUID as a SQL literal (its own text form: hex digits and dashes).
pub(crate) fn uuid_sql(id: Uuid) -> String {
    format!("'{id}'::uuid")
}

/// The scope's campus (`NULL` in school mode), as a one-trip read's argument.
pub(crate) fn campus_arg(scope: &rover_contracts::context::CallScope) -> ReadArg {
    ReadArg::Uuid(scope.run_mode.campus().map(|c| c.id.as_uuid()))
}

/// `Some(text)` as a SQL expression, `None` as `NULL`.
fn text_or_null(text: Option<&str>) -> String {
    text.map_or_else(|| "NULL".to_owned(), text_sql)
}

/// `BEGIN` and the call to `rover_open_call`.
fn call_sql(school_id: SchoolId, reads: CallReads<'_>) -> String {
    format!("BEGIN; {}", opening_sql(school_id, reads))
}

/// The call to `rover_open_call`, its arguments in the function's order.
fn opening_sql(school_id: SchoolId, reads: CallReads<'_>) -> String {
    let approval = reads.approval.as_ref();
    let uuid_or_null = |id: Option<Uuid>| id.map_or_else(|| "NULL".to_owned(), uuid_sql);
    let arguments = [
        uuid_sql(school_id.as_uuid()),
        reads.policy.to_string(),
        reads
            .policy_cached
            .map_or_else(|| "NULL".to_owned(), |version| version.to_string()),
        text_or_null(reads.inbox.map(ToolCallId::as_str)),
        text_or_null(approval.map(|a| a.tool)),
        text_or_null(approval.map(|a| a.call_id)),
        uuid_or_null(approval.map(|a| a.turn.as_uuid())),
        uuid_or_null(approval.map(|a| a.user.as_uuid())),
        uuid_or_null(approval.map(|a| a.thread.as_uuid())),
        approval.map_or_else(|| "NULL".to_owned(), |a| jsonb_sql(&a.input.to_string())),
    ];
    format!("SELECT * FROM rover_open_call({})", arguments.join(", "))
}

/// Commits a successful write with its audit row and its inbox row (the reply, the event and the
/// actor), in one round trip: `SELECT rover_finish_write(…); COMMIT`. On any error the
/// transaction is over (rolled back by Postgres or by the connection's close) and nothing of the
/// write remains. `reply` is the reply's JSON text, as the caller serialised it once.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", event = entry.event))]
pub async fn commit_write(
    tx: TenantTx,
    entry: &AuditEntry<'_>,
    call_id: &ToolCallId,
    reply: &str,
) -> Result<(), DomainError> {
    let json_or_null = |value: Option<&Value>| {
        value.map_or_else(|| "NULL".to_owned(), |value| jsonb_sql(&value.to_string()))
    };
    let arguments = [
        uuid_sql(tx.school_uuid()),
        entry
            .scope
            .run_mode
            .campus()
            .map_or_else(|| "NULL".to_owned(), |campus| uuid_sql(campus.id.as_uuid())),
        uuid_sql(entry.actor.user_id.as_uuid()),
        text_sql(&entry.actor.email),
        text_sql(entry.event),
        text_sql(&entry.change.subject_id),
        text_sql(call_id.as_str()),
        text_or_null(entry.trace_id),
        json_or_null(entry.change.before.as_ref()),
        json_or_null(Some(&entry.change.after)),
        json_or_null(entry.change.named.as_ref()),
        jsonb_sql(reply),
    ];
    tx.finish(format!(
        "SELECT rover_finish_write({}); COMMIT",
        arguments.join(", ")
    ))
    .await
}

#[cfg(test)]
mod tests {
    use super::text_sql;

    #[test]
    fn text_becomes_hex_that_postgres_decodes() {
        assert_eq!(
            text_sql("a'é"),
            "convert_from(decode('6127c3a9', 'hex'), 'UTF8') COLLATE \"default\""
        );
        assert_eq!(
            text_sql(""),
            "convert_from(decode('', 'hex'), 'UTF8') COLLATE \"default\""
        );
    }

    #[test]
    fn every_byte_of_a_long_text_becomes_its_two_hex_digits() {
        // Longer than one chunk of digits, and every byte value that UTF-8 text can hold.
        let text: String = (0_u32..0x800).filter_map(char::from_u32).collect();
        let sql = text_sql(&text);
        let digits = sql
            .strip_prefix("convert_from(decode('")
            .and_then(|rest| rest.strip_suffix("', 'hex'), 'UTF8') COLLATE \"default\""))
            .expect("the hex between its prefix and suffix");
        let expected: String = text.bytes().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(digits, expected);
    }
}

//! The chat retention sweep: every school that set a retention period (`chat_retention`) loses
//! the chats idle for longer, in batches; deleted-thread tombstones older than any turn identity
//! issued before them are forgotten; pending approvals past their time are marked expired (a
//! late answer is refused before that, from the row's `expires_at`). Each replica sweeps on its own timer: a batch skips the rows
//! another sweeper holds (`FOR UPDATE SKIP LOCKED`) and a second delete of a gone row does
//! nothing, so running everywhere at once is safe. Each school is swept on its own: one school's
//! error is logged and never stops the sweep of the others.

use std::time::Duration;

use sqlx::PgPool;

/// How long a deleted thread's tombstone is kept: longer than any turn identity lives (the
/// gateway's `identity.ttl_secs`, 30 minutes by default), so a turn of a deleted chat still in
/// the queue can never recreate it.
const TOMBSTONE_LIFE: Duration = Duration::from_secs(24 * 60 * 60);

/// What one sweep removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Chats past their school's retention period.
    pub chats: u64,
    /// Tombstones forgotten.
    pub tombstones: i64,
    /// Schools whose sweep failed (logged with the cause); the others were swept all the same.
    pub failed_schools: u64,
    /// Pending approvals past their time, marked expired.
    pub approvals: i64,
}

/// Sweeps once: for each school with a retention period, its expired chats (batch after batch
/// until none is left), then old tombstones, then every school's approvals past their time. One
/// school's failure is logged and counted, and the sweep goes on with the next: it never stops
/// the others. Only a failure to read the schools'
/// periods, to forget tombstones or to expire approvals fails the sweep.
pub async fn sweep(pool: &PgPool) -> Result<Swept, rover_domain::DomainError> {
    let mut swept = Swept::default();
    for (school, keep_days) in rover_turnstore::chats::retention(pool).await? {
        let school = rover_contracts::ids::SchoolId::from_uuid(school);
        match sweep_school(pool, school, keep_days).await {
            Ok(chats) => swept.chats += chats,
            Err(error) => {
                swept.failed_schools += 1;
                tracing::warn!(
                    error = ?error,
                    school_id = %school,
                    keep_days,
                    "the chat retention sweep failed for one school; the others are swept"
                );
            }
        }
    }
    swept.tombstones = rover_turnstore::chats::forget_deleted(pool, TOMBSTONE_LIFE).await?;
    swept.approvals = rover_turnstore::approvals::expire_due(pool).await?;
    if swept.chats > 0 || swept.tombstones > 0 || swept.approvals > 0 {
        tracing::info!(
            chats = swept.chats,
            tombstones = swept.tombstones,
            approvals = swept.approvals,
            "retention sweep removed expired chats and expired unanswered approvals"
        );
    }
    Ok(swept)
}

/// One school's expired chats, batch after batch until none is left; how many went.
async fn sweep_school(
    pool: &PgPool,
    school: rover_contracts::ids::SchoolId,
    keep_days: i32,
) -> Result<u64, rover_domain::DomainError> {
    let mut chats = 0;
    loop {
        let mut tx = rover_domain::begin_tenant(pool, school).await?;
        let deleted = rover_turnstore::chats::sweep_school(&mut tx, keep_days).await?;
        tx.commit().await?;
        chats += deleted;
        if deleted < rover_turnstore::chats::SWEEP_BATCH.unsigned_abs() {
            return Ok(chats);
        }
    }
}

/// Sweeps at start-up and then every `period`, until `stop` resolves; a failed sweep is logged
/// and the next one tries again.
pub(crate) async fn sweep_periodically(
    pool: PgPool,
    period: Duration,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let mut every = tokio::time::interval(period.max(Duration::from_secs(1)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let sweeping = async {
        loop {
            every.tick().await;
            if let Err(error) = sweep(&pool).await {
                tracing::warn!(%error, "the chat retention sweep failed");
            }
        }
    };
    tokio::select! {
        () = sweeping => {}
        _ = stop => {}
    }
}

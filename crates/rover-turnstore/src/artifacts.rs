//! Artifacts (`artifacts`): the files a thread's turns made, kept for download.

use rover_contracts::ids::{ThreadId, UserId};

use rover_domain::{DomainError, TenantTx};

/// Stores a file as a downloadable artifact of `thread`, made by `user`; returns its id.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread, bytes = content.len()))]
pub async fn save_artifact(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
    filename: &str,
    media_type: &str,
    content: &[u8],
) -> Result<rover_contracts::ids::ArtifactId, DomainError> {
    let school = tx.school_id().as_uuid();
    let id: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO artifacts (school_id, thread_id, filename, media_type, size_bytes, content, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
    )
    .bind(school)
    .bind(thread.as_uuid())
    .bind(filename)
    .bind(media_type)
    .bind(i64::try_from(content.len()).unwrap_or(i64::MAX))
    .bind(content)
    .bind(user.as_uuid())
    .fetch_one(tx.connection())
    .await?;
    Ok(rover_contracts::ids::ArtifactId::from_uuid(id))
}

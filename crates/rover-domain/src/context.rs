//! Minting a turn's runtime context (seed hop 1) from the user's *live* rows: who they are, where the
//! chat runs, what casbin lets them do (the advisory snapshot), which specialists exist, the calendar
//! and the teaching map. Nothing is cached: a role change shows on the next turn.

use rover_authz::Authorizer;
use rover_contracts::context::{Attachment, CampusRef, RunMode, RuntimeContext};
use rover_contracts::ids::{CampusId, UserId};
use uuid::Uuid;

use crate::{DomainError, TenantTx, actor, calendar, policy};

/// The runtime context of `user` for one turn. A campus-tied user always runs in their campus; a
/// school-wide user may pick a campus of their school (`campus`), else runs school-wide. Picking a
/// campus the school does not have is `NotFound`; a campus-tied user picking another is `Denied`.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", user_id = %user))]
pub async fn runtime_context(
    tx: &mut TenantTx,
    user: UserId,
    campus: Option<CampusId>,
    attachments: Vec<Attachment>,
) -> Result<RuntimeContext, DomainError> {
    let user_details = actor::load_user(tx, user).await?;
    let run_mode = match (&user_details.campus, campus) {
        (Some(own), Some(chosen)) if own.id != chosen => {
            return Err(DomainError::Denied(format!(
                "your chats are tied to the {} campus",
                own.name
            )));
        }
        (Some(own), _) => RunMode::Campus {
            campus: own.clone(),
        },
        (None, Some(chosen)) => RunMode::Campus {
            campus: campus_ref(tx, chosen).await?,
        },
        (None, None) => RunMode::School,
    };
    let (policies, assignments) = policy::load(tx).await?;
    let authorizer = Authorizer::build(tx.school_id(), &policies, &assignments)
        .await
        .map_err(|e| {
            DomainError::Invalid(format!("The school's policy could not be evaluated: {e}"))
        })?;
    Ok(RuntimeContext {
        user_permissions: authorizer.snapshot(user),
        capabilities: actor::capabilities(tx, user).await?,
        calendar: calendar(tx).await?,
        teaching_map: actor::teaching_map(tx, user).await?,
        user_details,
        run_mode,
        attachments,
    })
}

async fn campus_ref(tx: &mut TenantTx, campus: CampusId) -> Result<CampusRef, DomainError> {
    let row: Option<(Uuid, String)> = sqlx::query_as("SELECT id, name FROM campuses WHERE id = $1")
        .bind(campus.as_uuid())
        .fetch_optional(tx.connection())
        .await?;
    row.map(|(id, name)| CampusRef {
        id: CampusId::from_uuid(id),
        name,
    })
    .ok_or_else(|| DomainError::NotFound("No campus with that id was found here.".to_owned()))
}

//! What the tests share: scopes, and a tenant transaction for a demo user.

use rover_contracts::context::{CallScope, RunMode};
use rover_contracts::ids::SchoolId;
use rover_domain::testing::TestDb;
use rover_domain::{Actor, TenantTx, begin_tenant};

/// School-wide scope of `school`.
pub(crate) fn school_scope(school: SchoolId) -> CallScope {
    CallScope {
        school_id: school,
        run_mode: RunMode::School,
    }
}

/// Campus scope of a Hill campus ("Naalya", "Kololo").
pub(crate) fn campus_scope(db: &TestDb, campus: &str) -> CallScope {
    CallScope {
        school_id: db.ids.hill,
        run_mode: RunMode::Campus {
            campus: db.ids.campus_ref(campus),
        },
    }
}

/// A tenant transaction in the school of the demo user `email`, and that user as the actor.
pub(crate) async fn as_user(db: &TestDb, email: &str) -> (TenantTx, Actor) {
    let tx = tenant(db, db.ids.school_of(email)).await;
    (tx, db.ids.actor(email))
}

/// A tenant transaction in `school`.
pub(crate) async fn tenant(db: &TestDb, school: SchoolId) -> TenantTx {
    begin_tenant(&db.pool, school)
        .await
        .expect("begin a tenant transaction")
}

/// The Hill school-wide scope.
pub(crate) fn hill(db: &TestDb) -> CallScope {
    school_scope(db.ids.hill)
}

/// Today in Kampala, from the database clock the domain uses.
pub(crate) async fn today(db: &TestDb) -> chrono::NaiveDate {
    sqlx::query_scalar("SELECT (now() AT TIME ZONE 'Africa/Kampala')::date")
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

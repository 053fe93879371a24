//! A tool call's opening query reads the school's policy rows only when its policy version moved
//! since the caller last read them: a change to a policy row or a role assignment (any statement,
//! in its own transaction) bumps the version by trigger, so the very next call reads the new rows;
//! an unchanged policy is not read again. Another school's changes move only its own version.

use rover_contracts::ids::SchoolId;
use rover_domain::call::{CallReads, CallStart, begin_call};
use rover_domain::testing::TestDb;

async fn open(db: &TestDb, school: SchoolId, cached: Option<i64>) -> CallStart {
    begin_call(
        &db.pool,
        school,
        CallReads {
            policy: true,
            policy_cached: cached,
            ..CallReads::default()
        },
    )
    .await
    .expect("the call opens")
}

#[tokio::test]
async fn the_policy_rows_are_read_again_exactly_when_the_schools_version_moves() {
    let db = TestDb::new().await;
    let hill = db.ids.hill;
    let first = open(&db, hill, None).await;
    let version = first.policy_version.expect("a version");
    let (policies, assignments) = first.authz.expect("the rows, read the first time");
    assert!(!policies.is_empty() && !assignments.is_empty());
    drop(first.tx);

    // Unchanged: the version again, no rows.
    let unchanged = open(&db, hill, Some(version)).await;
    assert_eq!(unchanged.policy_version, Some(version));
    assert!(unchanged.authz.is_none());
    drop(unchanged);

    // A revoked grant (as the school's admin would, in a tenant transaction) moves the version:
    // the very next call reads the rows without it.
    let revoked = policies[0].clone();
    let mut tx = rover_domain::begin_tenant(&db.pool, hill).await.unwrap();
    sqlx::query("DELETE FROM authz_policies WHERE role = $1 AND action = $2 AND subject = $3")
        .bind(&revoked.role)
        .bind(revoked.permission.action.to_string())
        .bind(revoked.permission.subject.to_string())
        .execute(tx.connection())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let next = open(&db, hill, Some(version)).await;
    let moved = next.policy_version.expect("a version");
    assert!(moved > version, "{moved} after {version}");
    let (now, _) = next.authz.expect("the rows, read again");
    assert_eq!(now.len(), policies.len() - 1);
    assert!(!now.contains(&revoked));
    drop(next.tx);

    // A role assignment moves it too; another school's version does not move with this one's.
    let lakeside = open(&db, db.ids.lakeside, None).await;
    let lakeside_version = lakeside.policy_version.unwrap();
    drop(lakeside);
    let mut tx = rover_domain::begin_tenant(&db.pool, hill).await.unwrap();
    sqlx::query("DELETE FROM role_assignments WHERE user_id = $1")
        .bind(db.ids.user("amina@hill.school").as_uuid())
        .execute(tx.connection())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let after = open(&db, hill, Some(moved)).await;
    assert!(after.policy_version.unwrap() > moved);
    assert!(after.authz.is_some());
    drop(after);
    let lakeside = open(&db, db.ids.lakeside, Some(lakeside_version)).await;
    assert_eq!(lakeside.policy_version, Some(lakeside_version));
    assert!(lakeside.authz.is_none());
}

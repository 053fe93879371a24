//! Sign-in by email when users shard by school: `user_directory` (migration 0051) answers which
//! school an email or a user id belongs to, stays exactly the users on every path that creates,
//! changes or deletes one, and keeps email unique across schools.

use rover_contracts::ids::UserId;
use rover_domain::actor::{user_school, user_school_by_email};
use rover_domain::testing::TestDb;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use crate::helpers::tenant;

/// Users whose (lower-cased email, school, id) has no directory row, plus directory rows with no
/// such user: 0 when the directory is exactly the users.
async fn drift(owner: &mut PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM ( \
             (SELECT lower(email), school_id, id FROM users \
              EXCEPT SELECT email, school_id, user_id FROM user_directory) \
             UNION ALL \
             (SELECT email, school_id, user_id FROM user_directory \
              EXCEPT SELECT lower(email), school_id, id FROM users)) d",
    )
    .fetch_one(owner)
    .await
    .unwrap()
}

#[tokio::test]
async fn every_path_that_changes_a_user_keeps_the_directory_and_sign_in_right() {
    let db = TestDb::new().await;
    let mut owner = PgConnection::connect(db.owner_url()).await.unwrap();
    assert_eq!(drift(&mut owner).await, 0, "after the demo seed");

    // Created by the application, in its school's transaction.
    let mut tx = tenant(&db, db.ids.hill).await;
    let id: Uuid = sqlx::query_scalar(
        "INSERT INTO users (school_id, name, email, user_type) \
         VALUES ($1, 'Grace Apio', 'Grace.Apio@hill.school', 'teacher') RETURNING id",
    )
    .bind(db.ids.hill.as_uuid())
    .fetch_one(tx.connection())
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let user = UserId::from_uuid(id);
    assert_eq!(
        user_school_by_email(&db.pool, "grace.apio@HILL.school")
            .await
            .unwrap(),
        Some(db.ids.hill)
    );
    assert_eq!(
        user_school(&db.pool, user).await.unwrap(),
        Some(db.ids.hill)
    );

    // Her email changes: the old one signs in nowhere, the new one to her school.
    let mut tx = tenant(&db, db.ids.hill).await;
    sqlx::query("UPDATE users SET email = 'g.apio@hill.school' WHERE id = $1")
        .bind(id)
        .execute(tx.connection())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        user_school_by_email(&db.pool, "grace.apio@hill.school")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        user_school_by_email(&db.pool, "g.apio@hill.school")
            .await
            .unwrap(),
        Some(db.ids.hill)
    );
    assert_eq!(drift(&mut owner).await, 0, "after a change of email");

    // An operator moves her to the other school (as the owner: row-level security would refuse).
    sqlx::query("UPDATE users SET school_id = $2 WHERE id = $1")
        .bind(id)
        .bind(db.ids.lakeside.as_uuid())
        .execute(&mut owner)
        .await
        .unwrap();
    assert_eq!(
        user_school(&db.pool, user).await.unwrap(),
        Some(db.ids.lakeside)
    );
    assert_eq!(drift(&mut owner).await, 0, "after a change of school");

    // Deleted: she signs in nowhere.
    let mut tx = tenant(&db, db.ids.lakeside).await;
    sqlx::query("DELETE FROM users WHERE id = $1")
        .bind(id)
        .execute(tx.connection())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(user_school(&db.pool, user).await.unwrap(), None);
    assert_eq!(
        user_school_by_email(&db.pool, "g.apio@hill.school")
            .await
            .unwrap(),
        None
    );
    assert_eq!(drift(&mut owner).await, 0, "after a delete");

    // Every user at once, with everything that points at them.
    sqlx::raw_sql("TRUNCATE users CASCADE")
        .execute(&mut owner)
        .await
        .unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM user_directory")
        .fetch_one(&mut owner)
        .await
        .unwrap();
    assert_eq!(left, 0, "after a TRUNCATE");
}

#[tokio::test]
async fn an_email_is_unique_across_schools_and_each_school_sees_only_its_own_directory_rows() {
    let db = TestDb::new().await;
    // Lakeside cannot take a Hill email, whatever its case.
    let mut tx = tenant(&db, db.ids.lakeside).await;
    let taken = sqlx::query(
        "INSERT INTO users (school_id, name, email, user_type) \
         VALUES ($1, 'Impostor', 'Amina@Hill.School', 'teacher')",
    )
    .bind(db.ids.lakeside.as_uuid())
    .execute(tx.connection())
    .await
    .expect_err("an email taken in another school");
    let constraint = taken
        .as_database_error()
        .and_then(|e| e.constraint().map(str::to_owned));
    assert_eq!(
        constraint.as_deref(),
        Some("user_directory_pkey"),
        "{taken}"
    );
    drop(tx);
    assert_eq!(
        user_school_by_email(&db.pool, "amina@hill.school")
            .await
            .unwrap(),
        Some(db.ids.hill)
    );

    // Row-level security binds the directory like any table with a school_id.
    for school in [db.ids.hill, db.ids.lakeside] {
        let mut tx = tenant(&db, school).await;
        let (rows, others): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE school_id <> $1) FROM user_directory",
        )
        .bind(school.as_uuid())
        .fetch_one(tx.connection())
        .await
        .unwrap();
        let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
            .fetch_one(tx.connection())
            .await
            .unwrap();
        assert_eq!((rows, others), (users, 0));
    }
}

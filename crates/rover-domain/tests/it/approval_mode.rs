//! `rover_approval_mode`, the one function both doors ask whether a write waits for approval
//! (the tool server's opening query and the worker's gate): the caller's most specific rule
//! decides, and between the rules of two roles a caller holds at the same level, `never` wins.

use rover_domain::testing::TestDb;

use crate::helpers::tenant;

/// The mode `email`'s write with `tool` gets in Hill, with only `rules` (role, tool, mode) set.
async fn mode(
    db: &TestDb,
    email: &str,
    tool: &str,
    rules: &[(&str, &str, &str)],
) -> Option<String> {
    let mut tx = tenant(db, db.ids.hill).await;
    sqlx::query("DELETE FROM tool_approval_policy")
        .execute(tx.connection())
        .await
        .unwrap();
    for (role, tool, mode) in rules {
        sqlx::query(
            "INSERT INTO tool_approval_policy (school_id, role, tool, mode) \
             VALUES (current_setting('app.school_id')::uuid, $1, $2, $3)",
        )
        .bind(role)
        .bind(tool)
        .bind(mode)
        .execute(tx.connection())
        .await
        .unwrap();
    }
    let mode = sqlx::query_scalar("SELECT rover_approval_mode($1, $2)")
        .bind(tool)
        .bind(db.ids.user(email).as_uuid())
        .fetch_one(tx.connection())
        .await
        .unwrap();
    // Dropped, not committed: each call sees only its own rules.
    drop(tx);
    mode
}

#[tokio::test]
async fn a_tie_between_two_roles_the_caller_holds_goes_to_never() {
    let db = TestDb::new().await;
    // Amina teaches; here she is also the director of studies.
    let mut tx = tenant(&db, db.ids.hill).await;
    sqlx::query(
        "INSERT INTO role_assignments (school_id, user_id, role) \
         VALUES (current_setting('app.school_id')::uuid, $1, 'director_of_studies')",
    )
    .bind(db.ids.user("amina@hill.school").as_uuid())
    .execute(tx.connection())
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let amina = "amina@hill.school";
    let tied = [
        ("teacher", "*", "always"),
        ("director_of_studies", "*", "never"),
    ];
    assert_eq!(
        mode(&db, amina, "record_marks", &tied).await.as_deref(),
        Some("never")
    );
    // Whichever order the rows were written in.
    let reversed = [tied[1], tied[0]];
    assert_eq!(
        mode(&db, amina, "record_marks", &reversed).await.as_deref(),
        Some("never")
    );
    // Tied for one tool: the same.
    let for_the_tool = [
        ("teacher", "record_marks", "always"),
        ("director_of_studies", "record_marks", "never"),
    ];
    assert_eq!(
        mode(&db, amina, "record_marks", &for_the_tool)
            .await
            .as_deref(),
        Some("never")
    );
    // Not a tie: a more specific rule of one role still beats the other role's rule for any tool.
    let specific = [
        ("teacher", "record_marks", "always"),
        ("director_of_studies", "*", "never"),
    ];
    assert_eq!(
        mode(&db, amina, "record_marks", &specific).await.as_deref(),
        Some("always")
    );
    // Okello holds only `teacher`: his role's rule decides, and no rule at all is NULL (waits).
    assert_eq!(
        mode(&db, "okello@hill.school", "record_marks", &tied)
            .await
            .as_deref(),
        Some("always")
    );
    assert_eq!(
        mode(&db, "okello@hill.school", "record_marks", &[]).await,
        None
    );
}

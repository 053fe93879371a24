//! docs/runbook.md's SQL is what an operator pastes at 3 a.m.: every ```sql block in it runs
//! against a freshly migrated, seeded database (as the owner role, as the runbook says, each
//! statement in a transaction that is rolled back), so a renamed table or column fails here
//! rather than in an incident.

use std::path::Path;

use rover_domain::testing::TestDb;
use sqlx::Connection as _;

/// The statements of every ```sql block of `markdown`, in order.
fn sql_statements(markdown: &str) -> Vec<String> {
    markdown
        .split("```sql\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block))
        .flat_map(|block| block.split(';'))
        .map(str::trim)
        .filter(|statement| !statement.is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn every_sql_statement_in_the_runbook_runs_against_the_schema() {
    let runbook =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/runbook.md"))
            .expect("docs/runbook.md");
    let statements = sql_statements(&runbook);
    assert!(statements.len() >= 4, "{statements:#?}");
    let db = TestDb::new().await;
    let mut owner = sqlx::PgConnection::connect(db.owner_url()).await.unwrap();
    for statement in statements {
        // The runbook's placeholders: the school an alert names, a turn from a log line.
        let sql = statement
            .replace("<school id>", &db.ids.hill.to_string())
            .replace("<turn id>", &uuid::Uuid::new_v4().to_string());
        let mut transaction = owner.begin().await.unwrap();
        if let Err(error) = sqlx::raw_sql(&sql).execute(&mut *transaction).await {
            panic!("docs/runbook.md: {error}\n{statement}");
        }
        transaction.rollback().await.unwrap();
    }
}

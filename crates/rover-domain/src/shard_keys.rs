//! Whether the schema can be distributed by school: [`violations`] reads Postgres's catalog and
//! names every table, key, index and foreign key that a table sharded by `school_id` (Citus) could
//! not enforce or that could point a row into another school (docs/design/sharding.md).
//!
//! Every table in `public` is one of two kinds. A **reference table** is listed, with its reason,
//! in `reference_tables` (migration 0050): it is not per school, and every node of a sharded
//! cluster keeps a whole copy of it. Every other table is a **tenant table**, and for those the
//! rules are:
//!
//! 1. it has a `school_id uuid NOT NULL` column (the distribution column);
//! 2. it has a primary key (every table does: moving a shard replicates its rows by it);
//! 3. its primary key, every unique constraint and every unique index lead with `school_id`;
//! 4. every foreign key to another tenant table matches its `school_id` to the other's, so a row
//!    can never point into another school and both rows live on the same shard;
//! 5. no reference table has a foreign key into a tenant table (a whole copy cannot check a key
//!    against one shard).
//!
//! `_sqlx_migrations`, sqlx's own record of applied migrations, is neither: it stays on the
//! coordinator, where migrations run.

use std::fmt;

use sqlx::PgConnection;

/// One of the rules in the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// 1: a tenant table without a `school_id uuid NOT NULL`.
    SchoolColumn,
    /// 2: a table without a primary key.
    PrimaryKey,
    /// 3: a primary key, unique constraint or unique index not leading with `school_id`.
    UniqueLeadsWithSchool,
    /// 4: a foreign key between tenant tables that does not match `school_id` to `school_id`.
    ForeignKeyWithinSchool,
    /// 5: a foreign key from a reference table into a tenant table.
    ReferenceIntoTenant,
}

impl Rule {
    /// The rule as one line.
    pub fn says(self) -> &'static str {
        match self {
            Rule::SchoolColumn => "every tenant table has a school_id uuid NOT NULL column",
            Rule::PrimaryKey => "every table has a primary key",
            Rule::UniqueLeadsWithSchool => {
                "every primary key, unique constraint and unique index of a tenant table leads with school_id"
            }
            Rule::ForeignKeyWithinSchool => {
                "every foreign key between tenant tables matches school_id to school_id"
            }
            Rule::ReferenceIntoTenant => "no reference table has a foreign key into a tenant table",
        }
    }

    /// How to fix a table that breaks it.
    pub fn fix(self) -> &'static str {
        match self {
            Rule::SchoolColumn => {
                "add `school_id uuid NOT NULL REFERENCES schools (id)` (and `SELECT \
                 rover_enable_tenant_rls('<table>')`), or, if the table is not per school, list it \
                 in a migration: `INSERT INTO reference_tables VALUES ('<table>', '<why>')`"
            }
            Rule::PrimaryKey => {
                "add `PRIMARY KEY (school_id, …)` (a reference table: any primary key)"
            }
            Rule::UniqueLeadsWithSchool => {
                "put school_id first, e.g. `PRIMARY KEY (school_id, id)`, `UNIQUE (school_id, name)`; \
                 a value unique across schools (like a login email) needs a reference table that \
                 holds it, as `user_directory` does (migration 0051)"
            }
            Rule::ForeignKeyWithinSchool => {
                "reference the parent's (school_id, id): `FOREIGN KEY (school_id, parent_id) \
                 REFERENCES parent (school_id, id)`"
            }
            Rule::ReferenceIntoTenant => {
                "drop the key (keep the reference table's rows right another way, e.g. a trigger on \
                 the tenant table, as user_directory does), or make the referenced table a \
                 reference table"
            }
        }
    }

    /// The rule's number in the module docs.
    pub fn number(self) -> u8 {
        match self {
            Rule::SchoolColumn => 1,
            Rule::PrimaryKey => 2,
            Rule::UniqueLeadsWithSchool => 3,
            Rule::ForeignKeyWithinSchool => 4,
            Rule::ReferenceIntoTenant => 5,
        }
    }
}

/// A table, key, index or foreign key that breaks a [`Rule`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which rule.
    pub rule: Rule,
    /// The table it is on.
    pub table: String,
    /// What breaks it: the table itself, or a constraint or index with its definition.
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "table {}: {} breaks rule {} ({}); fix: {}",
            self.table,
            self.what,
            self.rule.number(),
            self.rule.says(),
            self.rule.fix()
        )
    }
}

/// The tables of `public` (sqlx's bookkeeping aside), each with whether it is a reference table
/// and the attribute number of its `school_id`, if it has one.
const TABLES: &str = "\
    WITH t AS ( \
        SELECT c.oid, c.relname::text AS name, \
               c.oid IN (SELECT r.table_name::oid FROM public.reference_tables r) AS reference, \
               (SELECT a.attnum FROM pg_attribute a \
                 WHERE a.attrelid = c.oid AND a.attname = 'school_id' AND NOT a.attisdropped) AS school \
          FROM pg_class c \
         WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') \
           AND NOT c.relispartition AND c.relname <> '_sqlx_migrations')";

/// Every violation of the rules in the module docs, ordered by rule and table; empty when the
/// schema can be distributed by school. Run it as a role that sees the whole catalog (the owner).
///
/// # Errors
/// A query failed (for one, `reference_tables` does not exist: migration 0050 has not run).
pub async fn violations(conn: &mut PgConnection) -> Result<Vec<Violation>, sqlx::Error> {
    let mut found = Vec::new();
    let queries: [(Rule, String); 5] = [
        (
            Rule::SchoolColumn,
            format!(
                "{TABLES} SELECT t.name, CASE \
                     WHEN col.column_name IS NULL THEN 'the table (no school_id column)' \
                     ELSE format('its school_id column (%s, %s)', col.data_type, \
                                 CASE col.is_nullable WHEN 'YES' THEN 'nullable' ELSE 'NOT NULL' END) END \
                 FROM t LEFT JOIN information_schema.columns col \
                   ON col.table_schema = 'public' AND col.table_name = t.name \
                  AND col.column_name = 'school_id' \
                 WHERE NOT t.reference \
                   AND (col.column_name IS NULL OR col.is_nullable = 'YES' OR col.data_type <> 'uuid')"
            ),
        ),
        (
            Rule::PrimaryKey,
            format!(
                "{TABLES} SELECT t.name, 'the table (no primary key)' FROM t \
                 WHERE NOT EXISTS (SELECT 1 FROM pg_constraint k \
                                    WHERE k.conrelid = t.oid AND k.contype = 'p')"
            ),
        ),
        (
            Rule::UniqueLeadsWithSchool,
            format!(
                "{TABLES} SELECT t.name, \
                        CASE WHEN k.contype = 'p' THEN format('primary key %s %s', k.conname, pg_get_constraintdef(k.oid)) \
                             WHEN k.contype IS NOT NULL THEN format('unique constraint %s %s', k.conname, pg_get_constraintdef(k.oid)) \
                             ELSE format('unique index %s', pg_get_indexdef(i.indexrelid)) END \
                 FROM t JOIN pg_index i ON i.indrelid = t.oid AND i.indisunique \
                 LEFT JOIN pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = t.oid \
                 WHERE NOT t.reference AND i.indkey[0] IS DISTINCT FROM t.school"
            ),
        ),
        (
            Rule::ForeignKeyWithinSchool,
            format!(
                "{TABLES} SELECT child.name, format('foreign key %s %s', k.conname, pg_get_constraintdef(k.oid)) \
                 FROM pg_constraint k \
                 JOIN t child ON child.oid = k.conrelid JOIN t parent ON parent.oid = k.confrelid \
                 WHERE k.contype = 'f' AND NOT child.reference AND NOT parent.reference \
                   AND NOT EXISTS (SELECT 1 FROM unnest(k.conkey, k.confkey) AS pair(mine, theirs) \
                                    WHERE pair.mine = child.school AND pair.theirs = parent.school)"
            ),
        ),
        (
            Rule::ReferenceIntoTenant,
            format!(
                "{TABLES} SELECT child.name, format('foreign key %s %s', k.conname, pg_get_constraintdef(k.oid)) \
                 FROM pg_constraint k \
                 JOIN t child ON child.oid = k.conrelid JOIN t parent ON parent.oid = k.confrelid \
                 WHERE k.contype = 'f' AND child.reference AND NOT parent.reference"
            ),
        ),
    ];
    for (rule, sql) in queries {
        let rows: Vec<(String, String)> = sqlx::query_as(&format!("{sql} ORDER BY 1, 2"))
            .fetch_all(&mut *conn)
            .await?;
        found.extend(
            rows.into_iter()
                .map(|(table, what)| Violation { rule, table, what }),
        );
    }
    Ok(found)
}

/// The reference tables, each with its reason, by name.
///
/// # Errors
/// The query failed (`reference_tables` does not exist before migration 0050).
pub async fn reference_tables(
    conn: &mut PgConnection,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    sqlx::query_as("SELECT table_name::text, reason FROM public.reference_tables ORDER BY 1")
        .fetch_all(conn)
        .await
}

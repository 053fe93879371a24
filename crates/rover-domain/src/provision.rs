//! Provisioning: a database, the role that owns and migrates its schema, and the role the services
//! connect as, which row-level security binds. Idempotent, and parameterised by names so every test
//! can have its own.
//!
//! *Architecture Invariant*: the application role is `LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE
//! NOCREATEDB`, owns nothing and is no member of the owner role; it may only `SELECT`, `INSERT`,
//! `UPDATE` and `DELETE` rows of the tables (the audit log only `SELECT` and `INSERT`; sqlx's
//! migrations and the list of reference tables not at all), use their
//! sequences and call the two tenant look-up functions, the chat sweep's two (the schools'
//! retention periods; forgetting old deleted-thread ids) and the chat search (see migration
//! 0036 for why it runs past row-level security). The owner role `BYPASSRLS` (its
//! security-definer look-ups must see every school's users, and the demo seed writes two schools),
//! so it is for migrations and seeding only, never for serving.

use std::fmt;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::{Connection, PgConnection};
use url::Url;

/// The schema, embedded at compile time.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// The names and passwords of what [`provision`] creates.
#[derive(Clone)]
pub struct Provision {
    /// The database.
    pub database: String,
    /// The role that owns the schema and runs migrations.
    pub owner_role: String,
    /// Its password.
    pub owner_password: String,
    /// The role the services connect as.
    pub app_role: String,
    /// Its password.
    pub app_password: String,
}

impl fmt::Debug for Provision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provision")
            .field("database", &self.database)
            .field("owner_role", &self.owner_role)
            .field("owner_password", &"[redacted]")
            .field("app_role", &self.app_role)
            .field("app_password", &"[redacted]")
            .finish()
    }
}

/// How to connect to a provisioned database, as each role. They hold passwords and never print.
#[derive(Clone)]
pub struct ProvisionedUrls {
    /// As the owner: for migrations and seeding only.
    pub owner_url: String,
    /// As the application role: what the services use.
    pub app_url: String,
}

impl fmt::Debug for ProvisionedUrls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProvisionedUrls { owner_url: [redacted], app_url: [redacted] }")
    }
}

/// Why provisioning failed.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// A database or role name that is not a plain lower-case identifier, or a bad password.
    #[error("invalid provisioning parameter: {0}")]
    Invalid(String),
    /// The admin URL could not be parsed.
    #[error("invalid admin database URL")]
    Url(#[from] url::ParseError),
    /// Postgres refused a step.
    #[error("provisioning failed")]
    Database(#[from] sqlx::Error),
    /// A migration failed.
    #[error("migrating the schema failed")]
    Migrate(#[from] MigrateError),
}

/// Creates (or updates) the two roles and the database, migrates it as the owner, and grants the
/// application role its privileges. `admin_url` connects as a superuser. Re-running it is safe,
/// and is how grants reach tables added by later migrations.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", database = %p.database))]
pub async fn provision(admin_url: &str, p: &Provision) -> Result<ProvisionedUrls, ProvisionError> {
    validate(p)?;
    let urls = ProvisionedUrls {
        owner_url: url_for(admin_url, &p.owner_role, &p.owner_password, &p.database)?,
        app_url: url_for(admin_url, &p.app_role, &p.app_password, &p.database)?,
    };
    let (db, owner, app) = (&p.database, &p.owner_role, &p.app_role);

    let mut admin = PgConnection::connect(admin_url).await?;
    for role in [owner, app] {
        sqlx::raw_sql(&format!(
            "DO $$ BEGIN CREATE ROLE \"{role}\"; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        ))
        .execute(&mut admin)
        .await?;
    }
    sqlx::raw_sql(&format!(
        "ALTER ROLE \"{owner}\" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION \
             BYPASSRLS PASSWORD {owner_pw}; \
         ALTER ROLE \"{app}\" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION \
             NOBYPASSRLS PASSWORD {app_pw}; \
         REVOKE \"{owner}\" FROM \"{app}\";",
        owner_pw = literal(&p.owner_password),
        app_pw = literal(&p.app_password),
    ))
    .execute(&mut admin)
    .await?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(db)
            .fetch_one(&mut admin)
            .await?;
    if !exists {
        match sqlx::raw_sql(&format!("CREATE DATABASE \"{db}\" OWNER \"{owner}\""))
            .execute(&mut admin)
            .await
        {
            // Another provisioner won the race: the database exists, which is all we wanted.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P04") => {}
            other => {
                other?;
            }
        }
    }
    sqlx::raw_sql(&format!(
        "REVOKE ALL ON DATABASE \"{db}\" FROM PUBLIC; GRANT CONNECT ON DATABASE \"{db}\" TO \"{app}\";"
    ))
    .execute(&mut admin)
    .await?;
    admin.close().await?;

    let mut owner_conn = PgConnection::connect(&urls.owner_url).await?;
    MIGRATOR.run(&mut owner_conn).await?;
    sqlx::raw_sql(&format!(
        "GRANT USAGE ON SCHEMA public TO \"{app}\"; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \"{app}\"; \
         REVOKE ALL ON TABLE _sqlx_migrations, reference_tables FROM \"{app}\"; \
         REVOKE UPDATE, DELETE ON TABLE audit_log FROM \"{app}\"; \
         GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO \"{app}\"; \
         GRANT EXECUTE ON FUNCTION rover_user_school(uuid), rover_user_school_by_email(text), \
         rover_chat_retention(), rover_forget_deleted_threads(interval), \
         rover_search_threads(uuid, text), rover_approvals_waiting(), rover_expire_approvals(), \
         rover_open_call(uuid, boolean, bigint, text, text, text, uuid, uuid, uuid, jsonb), \
         rover_finish_write(uuid, uuid, uuid, text, text, text, text, text, jsonb, jsonb, jsonb, jsonb), \
         rover_list_departments(uuid), rover_list_classes(uuid, bigint), \
         rover_open_read(uuid, bigint), rover_list_staff(uuid, text[], bigint), \
         rover_find_students(text[], uuid, uuid, bigint) \
         TO \"{app}\";"
    ))
    .execute(&mut owner_conn)
    .await?;
    owner_conn.close().await?;
    Ok(urls)
}

/// Drops the database (disconnecting whoever is still connected) and both roles, if they exist.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", database = %p.database))]
pub async fn drop_provisioned(admin_url: &str, p: &Provision) -> Result<(), ProvisionError> {
    validate(p)?;
    let mut admin = PgConnection::connect(admin_url).await?;
    sqlx::raw_sql(&format!(
        "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
        p.database
    ))
    .execute(&mut admin)
    .await?;
    sqlx::raw_sql(&format!(
        "DROP ROLE IF EXISTS \"{}\"; DROP ROLE IF EXISTS \"{}\";",
        p.app_role, p.owner_role
    ))
    .execute(&mut admin)
    .await?;
    admin.close().await?;
    Ok(())
}

/// Names go into SQL as quoted identifiers, so only plain ones are accepted.
fn validate(p: &Provision) -> Result<(), ProvisionError> {
    for (what, name) in [
        ("database", &p.database),
        ("owner role", &p.owner_role),
        ("app role", &p.app_role),
    ] {
        let plain = (1..=63).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !plain {
            return Err(ProvisionError::Invalid(format!(
                "the {what} name {name:?} must be 1 to 63 lower-case letters, digits or underscores"
            )));
        }
    }
    if p.owner_role == p.app_role {
        return Err(ProvisionError::Invalid(
            "the app role must not be the owner role".to_owned(),
        ));
    }
    if p.owner_password.is_empty() || p.app_password.is_empty() {
        return Err(ProvisionError::Invalid(
            "both roles need a password".to_owned(),
        ));
    }
    if p.owner_password.contains('\0') || p.app_password.contains('\0') {
        return Err(ProvisionError::Invalid(
            "passwords must not contain NUL".to_owned(),
        ));
    }
    Ok(())
}

/// A SQL string literal (standard-conforming strings: only quotes need doubling).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `admin_url` with another user, password and database.
fn url_for(
    admin_url: &str,
    user: &str,
    password: &str,
    database: &str,
) -> Result<String, ProvisionError> {
    let mut url = Url::parse(admin_url)?;
    let bad = |_| ProvisionError::Invalid("the admin URL cannot carry credentials".to_owned());
    url.set_username(user).map_err(bad)?;
    url.set_password(Some(password)).map_err(bad)?;
    url.set_path(database);
    Ok(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(database: &str, owner: &str, app: &str) -> Provision {
        Provision {
            database: database.into(),
            owner_role: owner.into(),
            owner_password: "o'k".into(),
            app_role: app.into(),
            app_password: "secret".into(),
        }
    }

    #[test]
    fn only_plain_names_are_accepted() {
        assert!(validate(&names("rover", "rover_owner", "rover_app")).is_ok());
        assert!(validate(&names("Rover", "rover_owner", "rover_app")).is_err());
        assert!(validate(&names("rover\"; DROP", "rover_owner", "rover_app")).is_err());
        assert!(validate(&names("rover", "same", "same")).is_err());
        assert!(validate(&names("", "rover_owner", "rover_app")).is_err());
    }

    #[test]
    fn urls_swap_credentials_and_database_and_never_print() {
        let url = url_for(
            "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
            "rover_app",
            "p@ss word",
            "rover",
        )
        .unwrap();
        assert_eq!(
            url,
            "postgres://rover_app:p%40ss%20word@127.0.0.1:5432/rover?sslmode=disable"
        );
        let urls = ProvisionedUrls {
            owner_url: url.clone(),
            app_url: url,
        };
        assert!(!format!("{urls:?}").contains("word"));
        assert!(!format!("{:?}", names("a", "b", "c")).contains("secret"));
        assert_eq!(literal("o'k"), "'o''k'");
    }
}

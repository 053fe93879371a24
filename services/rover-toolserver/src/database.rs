//! `rover-toolserver db setup`: provision the database and its two roles, migrate the schema, and
//! optionally seed the demo school. Idempotent, so `make run` calls it on every start.

use anyhow::Context as _;
use rover_domain::provision::{Provision, provision};
use sqlx::postgres::PgPoolOptions;

/// What `db setup` creates. Defaults suit a local development machine with trust authentication.
#[derive(Debug, Clone, clap::Args)]
pub struct SetupArgs {
    /// A Postgres superuser URL, used only to create the database and roles.
    #[arg(
        long,
        env = "ROVER_DB_ADMIN_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pub admin_url: String,
    /// The database to create.
    #[arg(long, default_value = "rover")]
    pub database: String,
    /// The role that owns and migrates the schema (never used to serve).
    #[arg(long, default_value = "rover_owner")]
    pub owner_role: String,
    /// The owner role's password.
    #[arg(
        long,
        env = "ROVER_DB_OWNER_PASSWORD",
        default_value = "rover_owner_dev",
        hide_default_value = true
    )]
    pub owner_password: String,
    /// The role the services connect as: not the owner, not a superuser, no BYPASSRLS.
    #[arg(long, default_value = "rover_app")]
    pub app_role: String,
    /// The application role's password.
    #[arg(
        long,
        env = "ROVER_DB_APP_PASSWORD",
        default_value = "rover_app_dev",
        hide_default_value = true
    )]
    pub app_password: String,
    /// Also seed the demo schools (Kampala Hill School and Lakeside College).
    #[arg(long)]
    pub demo: bool,
}

/// Provisions, migrates and (with `--demo`) seeds.
pub async fn setup(args: &SetupArgs) -> anyhow::Result<()> {
    let plan = Provision {
        database: args.database.clone(),
        owner_role: args.owner_role.clone(),
        owner_password: args.owner_password.clone(),
        app_role: args.app_role.clone(),
        app_password: args.app_password.clone(),
    };
    let urls = provision(&args.admin_url, &plan)
        .await
        .context("Failed to provision the database")?;
    if args.demo {
        let owner = PgPoolOptions::new()
            .max_connections(1)
            .connect(&urls.owner_url)
            .await
            .context("Failed to connect as the owner role")?;
        rover_domain::seed_demo(&owner)
            .await
            .context("Failed to seed the demo data")?;
        owner.close().await;
    }
    Ok(())
}

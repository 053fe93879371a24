//! [`TestDb`]: a throw-away database per test, provisioned with its own roles, migrated and seeded
//! with the demo data, and dropped (with its roles) when the test ends, so parallel test processes
//! never share state. Behind the `test-support` feature.

use std::fmt;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use crate::provision::{Provision, ProvisionedUrls, drop_provisioned, provision};
use crate::seed::{DemoIds, seed_demo};

/// Where tests reach Postgres as a superuser, unless `ROVER_TEST_ADMIN_URL` says otherwise.
pub const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A fresh, seeded database `rover_test_<uuid>`, with roles of its own.
pub struct TestDb {
    /// Connected as the application role: row-level security applies.
    pub pool: PgPool,
    /// The demo data's ids.
    pub ids: DemoIds,
    urls: ProvisionedUrls,
    admin_url: String,
    provision: Provision,
}

impl TestDb {
    /// Provisions, migrates and seeds a new database. Panics if Postgres is unreachable: a test
    /// without its database cannot say anything.
    pub async fn new() -> Self {
        let admin_url =
            std::env::var("ROVER_TEST_ADMIN_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.to_owned());
        let name = format!("rover_test_{}", Uuid::new_v4().simple());
        let provision = Provision {
            database: name.clone(),
            owner_role: format!("{name}_owner"),
            owner_password: Uuid::new_v4().to_string(),
            app_role: format!("{name}_app"),
            app_password: Uuid::new_v4().to_string(),
        };
        let urls = provision_or_panic(&admin_url, &provision).await;
        let owner = PgPoolOptions::new()
            .max_connections(1)
            .connect(&urls.owner_url)
            .await
            .expect("connect as the owner role");
        let ids = seed_demo(&owner).await.expect("seed the demo data");
        owner.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect(&urls.app_url)
            .await
            .expect("connect as the app role");
        TestDb {
            pool,
            ids,
            urls,
            admin_url,
            provision,
        }
    }

    /// The URL the application role connects with (for a service under test).
    pub fn app_url(&self) -> &str {
        &self.urls.app_url
    }

    /// The URL the owner role connects with: it bypasses row-level security, so tests use it only
    /// to look behind the application's back.
    pub fn owner_url(&self) -> &str {
        &self.urls.owner_url
    }

    /// The names this database was provisioned with.
    pub fn provision(&self) -> &Provision {
        &self.provision
    }
}

async fn provision_or_panic(admin_url: &str, p: &Provision) -> ProvisionedUrls {
    match provision(admin_url, p).await {
        Ok(urls) => urls,
        Err(error) => {
            let _ = drop_provisioned(admin_url, p).await;
            panic!("provisioning a test database failed: {error:?}");
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Dropping is async and `Drop` is not: do it on a thread with its own runtime, so it works
        // whether or not the test's runtime is still running. `WITH (FORCE)` ends our connections.
        let admin_url = self.admin_url.clone();
        let provision = self.provision.clone();
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(drop_provisioned(&admin_url, &provision))
                .map_err(|e| format!("{e:?}"))
        })
        .join()
        .unwrap_or_else(|_| Err("the dropping thread panicked".to_owned()));
        if let Err(error) = dropped {
            eprintln!(
                "could not drop test database {}: {error}",
                self.provision.database
            );
        }
    }
}

impl fmt::Debug for TestDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestDb")
            .field("database", &self.provision.database)
            .finish_non_exhaustive()
    }
}

//! What a stack runs on: a fresh seeded database, a RabbitMQ vhost and a turn-identity key pair of
//! its own (each removed when dropped), and the environment that points the services at them.

use rover_domain::testing::TestDb;
use rover_testkit::{TestVhost, TurnKeys};

use crate::process::Env;

/// A database, vhost and key pair that exist for one test, eval or bench run.
#[derive(Debug)]
pub struct World {
    /// The seeded database (its application role is what the services connect as).
    pub db: TestDb,
    /// The turn-identity keys the gateway signs with and the tool server verifies with.
    pub keys: TurnKeys,
    /// The broker vhost.
    pub vhost: TestVhost,
}

impl World {
    /// A new vhost, database and key pair.
    pub async fn create() -> World {
        World::on(TestVhost::create()).await
    }

    /// A new database and key pair on `vhost` (one the caller has prepared: users, rights).
    pub async fn on(vhost: TestVhost) -> World {
        World {
            db: TestDb::new().await,
            keys: TurnKeys::generate(),
            vhost,
        }
    }

    /// The environment every service on this world gets: its vhost, its database, its keys, HTTP
    /// and metrics listeners on free local ports, and development sign-in (HS256 with the
    /// built-in secret, which `rover_gateway::dev_token` signs with).
    pub fn service_env(&self) -> Env {
        let mut env = Env::new();
        env.insert("ROVER_AMQP__URL".into(), self.vhost.url());
        let addresses = self.vhost.addresses();
        if !addresses.is_empty() {
            // A vhost on the local cluster: every node, and a tools queue that outlives one.
            env.insert("ROVER_AMQP__ADDRESSES".into(), addresses.join(","));
            env.insert("ROVER_AMQP__TOOLS_QUEUE".into(), "quorum".into());
        }
        env.insert("ROVER_DATABASE__URL".into(), self.db.app_url().to_owned());
        env.insert("ROVER_HTTP__LISTEN".into(), "127.0.0.1:0".into());
        // The gateway's metrics listener (the other services have none of this name), so stacks,
        // evals, benches and `make run` never collide.
        env.insert("ROVER_HTTP__METRICS_ADDR".into(), "127.0.0.1:0".into());
        env.insert(
            "ROVER_IDENTITY__PUBLIC_KEY_FILE".into(),
            self.keys.public_key_file().display().to_string(),
        );
        env.insert(
            "ROVER_IDENTITY__PRIVATE_KEY_FILE".into(),
            self.keys.private_key_file().display().to_string(),
        );
        env.insert("ROVER_AUTH__DEVELOPMENT".into(), "true".into());
        env
    }
}

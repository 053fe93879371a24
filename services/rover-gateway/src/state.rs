//! The state every handler shares: connections, the authenticator and the turn-identity signer.

use std::sync::Arc;

use rover_contracts::identity::TurnSigner;
use rover_messaging::{Broker, Publisher, Topology};
use rover_telemetry::metrics::{GatewayMetrics, Metrics};
use sqlx::PgPool;

use crate::auth::Authenticator;
use crate::events::TurnEvents;
use crate::limits::{StreamSlots, TrustedProxies};
use crate::mcp::approval::Questions;
use crate::settings::Settings;

/// Cheap to clone; handlers get it through axum's `State`.
#[derive(Debug, Clone)]
pub struct AppState(pub Arc<Shared>);

/// What the state holds.
#[derive(Debug)]
pub struct Shared {
    /// The effective settings.
    pub settings: Settings,
    /// Postgres, as the application role.
    pub pool: PgPool,
    /// RabbitMQ.
    pub broker: Broker,
    /// Confirmed, mandatory publishing.
    pub publisher: Publisher,
    /// Exchange and queue names.
    pub topology: Topology,
    /// Verifies bearer tokens.
    pub auth: Authenticator,
    /// Signs turn identities with the gateway's Ed25519 key.
    pub signer: TurnSigner,
    /// Asks MCP clients for approvals and reads their answers (a secret derived from `signer`).
    pub questions: Questions,
    /// The chat metrics this gateway moves.
    pub metrics: GatewayMetrics,
    /// Everything `/metrics` renders.
    pub registry: Metrics,
    /// Resumed streams per user on this replica (`chat.max_resumes_per_user`).
    pub resumes: Arc<StreamSlots>,
    /// This replica's one subscription to turn events, fanned out to its streams.
    pub events: TurnEvents,
    /// Whose `X-Forwarded-For` names the client (`http.trusted_proxies`).
    pub proxies: TrustedProxies,
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

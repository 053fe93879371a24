//! `rover-stack`: the one way Rover's cross-service tests, `make eval` and `make bench` start the
//! real binaries as child processes.
//!
//! - [`process`]: one binary — found next to the running executable (debug next to a test, release
//!   next to `rover-bench`), started with a clean `ROVER_` environment plus the caller's, JSON
//!   logs, ready once it logs its ready line (whose addresses [`Ready`] parses), its log lines kept
//!   in a directory when asked, killed when dropped.
//! - [`world`]: what a stack runs on — a fresh database, RabbitMQ vhost and turn-identity key pair
//!   — and the environment that points the services at them.
//! - [`stack`]: the scripted model (or any model endpoint), the tool server, the worker and the
//!   gateway, started in that order on a world.
//!
//! Each caller keeps only what is its own: the tests their replicas, restarts and signals, the
//! bench its profiling and memory readings, the eval its choice of model.
//!
//! Why a crate of its own rather than a module of `rover-testkit`: `rover-testkit` is a
//! dev-dependency of the services and of `rover-messaging`, and stays light (no database code);
//! this launcher needs `rover-domain`'s `TestDb` (sqlx, migrations, the demo seed). Only
//! `rover-tests`, `rover-eval` and `rover-bench` depend on it, so nothing heavier reaches a
//! service's build, and a feature flag on `rover-testkit` that every user but three would have to
//! leave off is not needed.

pub mod process;
pub mod stack;
pub mod world;

pub use process::{
    Env, LaunchError, Launcher, Process, READY, Ready, SERVICES, Spawn, binary, command,
};
pub use stack::{Addrs, Model, STACK_ENV, Stack, StackOptions, skills_dir, stack_env};
pub use world::World;

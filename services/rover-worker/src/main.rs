//! The `rover-worker` binary: parse the command line, then hand over to the library.

use clap::Parser;

/// Rover's agent worker: consumes turns, builds the agent per turn, calls the model and the tools.
///
/// Settings are layered: defaults, then the TOML file given with --config, then ROVER_… environment
/// variables with __ for nesting (ROVER_MODEL__BASE_URL sets model.base_url).
#[derive(Debug, Parser)]
#[command(name = "rover-worker", version)]
struct Cli {
    #[command(flatten)]
    service: rover_service::ServiceArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    rover_service::run("rover-worker", &cli.service, rover_worker::run).await
}

//! The `rover-toolserver` binary: parse the command line, then hand over to the library.

use clap::Parser;

/// Rover's tool server: consumes tool RPCs and runs the secure execute() pipeline.
///
/// Settings are layered: defaults, then the TOML file given with --config, then ROVER_… environment
/// variables with __ for nesting (ROVER_AMQP__URL sets amqp.url).
#[derive(Debug, Parser)]
#[command(name = "rover-toolserver", version)]
struct Cli {
    #[command(flatten)]
    service: rover_service::ServiceArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    rover_service::run("rover-toolserver", &cli.service, rover_toolserver::run).await
}

//! The `rover-gateway` binary: parse the command line, then hand over to the library.

use clap::Parser;

/// The HTTP edge of Rover: useChat over SSE, JWT authentication, runtime-context minting, REST.
///
/// Settings are layered: defaults, then the TOML file given with --config, then ROVER_… environment
/// variables with __ for nesting (ROVER_AMQP__URL sets amqp.url).
#[derive(Debug, Parser)]
#[command(name = "rover-gateway", version)]
struct Cli {
    #[command(flatten)]
    service: rover_service::ServiceArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    rover_service::run("rover-gateway", &cli.service, rover_gateway::run).await
}

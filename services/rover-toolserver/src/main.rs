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
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Database administration.
    #[command(subcommand)]
    Db(Db),
}

#[derive(Debug, clap::Subcommand)]
enum Db {
    /// Create the database and its roles, migrate the schema, and optionally seed the demo schools.
    /// Safe to run again.
    Setup(rover_toolserver::database::SetupArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        None => rover_service::run("rover-toolserver", &cli.service, rover_toolserver::run).await,
        Some(Command::Db(Db::Setup(args))) => {
            rover_service::init_process();
            rover_toolserver::database::setup(&args).await?;
            eprintln!(
                "rover-toolserver: database {} is ready (migrated{}); services connect as {}",
                args.database,
                if args.demo {
                    ", demo schools seeded"
                } else {
                    ""
                },
                args.app_role,
            );
            Ok(())
        }
    }
}

//! The `rover-toolserver` binary: parse the command line, then hand over to the library.

use clap::Parser;

/// mimalloc instead of glibc's allocator: with the span-field change, a quarter fewer instructions
/// per tool call, for about 18 MB more resident (decision 0019).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Broker administration.
    #[command(subcommand)]
    Broker(Broker),
}

#[derive(Debug, clap::Subcommand)]
enum Broker {
    /// Declare the exchanges, queues and bindings (as the configured, administrator user), then
    /// print each service's least-privilege rights in that vhost, one line per service:
    /// `<user> <configure> <write> <read>`, tab-separated, for `rabbitmqctl set_permissions`.
    /// Services whose users have only these rights run with ROVER_AMQP__DECLARE_TOPOLOGY=false.
    /// Safe to run again.
    Setup,
}

#[derive(Debug, clap::Subcommand)]
enum Db {
    /// Create the database and its roles, migrate the schema, and optionally seed the demo schools.
    /// Safe to run again.
    Setup(rover_toolserver::SetupArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The runtime is built from the settings (`runtime.worker_threads`), so they are read first;
    // `run` reads them again, as every service does.
    let settings: rover_toolserver::Settings = cli.service.load()?;
    rover_service::runtime(&settings.runtime)?.block_on(serve(cli))
}

async fn serve(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        None => rover_service::run("rover-toolserver", &cli.service, rover_toolserver::run).await,
        Some(Command::Broker(Broker::Setup)) => {
            rover_service::init_process();
            let settings: rover_toolserver::Settings = cli.service.load()?;
            let rights = rover_toolserver::broker_setup(&settings).await?;
            eprintln!("rover-toolserver: the broker topology is declared; each service's rights:");
            for (user, p) in rights {
                #[allow(clippy::print_stdout)]
                {
                    println!("{user}\t{}\t{}\t{}", p.configure, p.write, p.read);
                }
            }
            Ok(())
        }
        Some(Command::Db(Db::Setup(args))) => {
            rover_service::init_process();
            rover_toolserver::setup(&args).await?;
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

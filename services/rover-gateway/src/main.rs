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
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Print a development bearer token (HS256, signed with auth.hs256_secret, or with the built-in
    /// development secret when none is set) for a demo user.
    Token {
        /// The user's login email, e.g. admin@hill.school.
        #[arg(long)]
        email: String,
    },
    /// Send one message to a running gateway as a demo user and narrate the turn as the Hub would.
    Demo {
        /// The user's login email.
        #[arg(long, default_value = "admin@hill.school")]
        email: String,
        /// What the user says.
        #[arg(long, default_value = "Create a department called Sciences")]
        message: String,
        /// The gateway's base URL.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        None => rover_service::run("rover-gateway", &cli.service, rover_gateway::run).await,
        Some(Command::Token { email }) => {
            rover_service::init_process();
            let settings = development_tools(cli.service.load()?);
            let token = rover_gateway::dev_token_for_email(&settings, &email).await?;
            #[allow(clippy::print_stdout)]
            {
                println!("{token}");
            }
            Ok(())
        }
        Some(Command::Demo {
            email,
            message,
            url,
        }) => {
            rover_service::init_process();
            let settings = development_tools(cli.service.load()?);
            let token = rover_gateway::dev_token_for_email(&settings, &email).await?;
            eprintln!("{email}: {message}");
            rover_gateway::narrate(&url, &token, &message, &mut std::io::stderr()).await?;
            Ok(())
        }
    }
}

/// `token` and `demo` are development tools: they sign with the built-in development secret when
/// no secret is configured. That gives nothing away — only a gateway in development mode accepts
/// such a token — and `rover-gateway token` works beside `make run` without extra variables.
fn development_tools(mut settings: rover_gateway::Settings) -> rover_gateway::Settings {
    settings.auth.development = true;
    settings
}

//! `rover-eval`: see the library's docs and `docs/eval.md`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Parser;
use rover_eval::report::CaseResult;
use rover_eval::stack::ModelChoice;
use rover_eval::{Options, cases};

/// Sends fixed staff chats through a Rover of its own (real gateway, worker and tool server on a
/// fresh vhost and seeded database), answering the questions they raise, and scores each turn:
/// the right tool, the right arguments, no unintended write, no false claim, and a finished
/// turn. Prints a table; writes JSON.
///
/// Needs the workspace binaries built next to it (`make eval` builds them), a local RabbitMQ
/// (`rabbitmqctl` on PATH) and Postgres with superuser access (`ROVER_TEST_ADMIN_URL`, default
/// postgres://postgres@127.0.0.1:5432/postgres).
#[derive(Debug, Parser)]
#[command(name = "rover-eval", version)]
struct Cli {
    /// An OpenAI-compatible server's base URL, ending in /v1 (e.g. llama-server's).
    #[arg(
        long,
        conflicts_with = "scripted",
        required_unless_present_any = ["scripted", "prompts", "from_feedback", "markdown_from"]
    )]
    model_url: Option<String>,
    /// The model name sent with each request.
    #[arg(long, default_value = "local")]
    model_name: String,
    /// Run against the scripted test double (started here) instead of a real model.
    #[arg(long)]
    scripted: bool,
    /// The scripted model's rules file (default: its own rules.toml).
    #[arg(long, requires = "scripted")]
    rules: Option<PathBuf>,
    /// The scripted model writes its tool calls as text, the way local models do (fenced, bare,
    /// tagged or list), so the worker's recovery of text tool calls is what gets scored.
    #[arg(long, requires = "scripted", value_name = "STYLE")]
    scripted_tool_calls: Option<String>,
    /// The cases file.
    #[arg(long, default_value_os_t = cases::default_file())]
    cases: PathBuf,
    /// Only the cases marked with this subset (e.g. `ci`).
    #[arg(long)]
    subset: Option<String>,
    /// Only these case ids (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Longest one turn may take, in seconds.
    #[arg(long, default_value_t = 300)]
    turn_timeout: u64,
    /// The worker's deadline for one model request, in milliseconds.
    #[arg(long, default_value_t = 240_000)]
    model_timeout_ms: u64,
    /// Where the JSON goes (`eval-<timestamp>.json` and `latest.json`), and the services' logs
    /// (`logs/`).
    #[arg(long, default_value = "target/eval")]
    out: PathBuf,
    /// Exit with status 1 when fewer than this fraction of the cases pass (0 to 1). Any
    /// unintended write, harness error or turn without `finish` fails the run whatever this is.
    #[arg(long, default_value_t = 0.0)]
    min_pass: f64,
    /// Run no case: turn the replies staff rated in the Rover database at this URL (an owner or
    /// admin URL: it reads every school's feedback) into cases, printed as a cases file (or
    /// written to --write-cases) for --cases. Rated up: the same tools and writes again; rated
    /// down: in the `needs-review` subset, with the comment and trace id.
    #[arg(long, value_name = "DATABASE_URL", conflicts_with_all = ["prompts", "scripted", "model_url"])]
    from_feedback: Option<String>,
    /// Where --from-feedback writes the cases (default: standard output).
    #[arg(long, requires = "from_feedback", value_name = "FILE")]
    write_cases: Option<PathBuf>,
    /// Run no case: print each demo user's fixed prompt size (system prompt and tool
    /// definitions) — exact tokens when --model-url is a llama.cpp server, else estimated — and
    /// write each to <out>/prompts/<user>.txt.
    #[arg(long)]
    prompts: bool,
    /// Run no case: print the table of a run's JSON (as written to --out) in Markdown, as
    /// `docs/eval.md` shows it (`make docs`). Needs no broker, database, model or service.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompts", "scripted", "model_url", "from_feedback"])]
    markdown_from: Option<PathBuf>,
}

fn progress(r: &CaseResult) {
    let calls: Vec<String> = r
        .turns()
        .map(|o| {
            let names: Vec<&str> = o.calls.iter().map(|c| c.name.as_str()).collect();
            names.join(", ")
        })
        .collect();
    eprintln!(
        "  {} {:<30} {:>6.1} s  [{}]{}",
        if r.passed { "pass" } else { "FAIL" },
        r.case.id,
        r.millis() as f64 / 1000.0,
        calls.join("] ⏵ ["),
        if r.passed {
            String::new()
        } else {
            let said: Vec<String> = r
                .turns()
                .map(|o| o.text.chars().take(160).collect())
                .collect();
            format!("  — {}; said: {said:?}", r.score.notes.join("; "))
        }
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(path) = &cli.markdown_from {
        print!("{}", rover_eval::report::Report::read(path)?.markdown());
        return Ok(());
    }
    if let Some(url) = &cli.from_feedback {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let cases = rover_eval::feedback::cases_from_feedback(url).await?;
        match &cli.write_cases {
            Some(path) => {
                std::fs::write(path, &cases)?;
                eprintln!("Cases from feedback: {}", path.display());
            }
            None => print!("{cases}"),
        }
        return Ok(());
    }
    if cli.prompts {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let sizes = rover_eval::prompts::measure(cli.model_url.as_deref(), false).await?;
        println!("{}", rover_eval::prompts::table(&sizes));
        let dir = cli.out.join("prompts");
        rover_eval::prompts::write(&sizes, &dir)?;
        println!("Each prompt: {}/<user>.txt", dir.display());
        return Ok(());
    }
    let all = cases::load(&cli.cases)?;
    let selected = cases::select(all, cli.subset.as_deref(), &cli.only);
    if selected.is_empty() {
        bail!("No case matches --subset/--only");
    }
    let model = match cli.model_url {
        Some(base_url) => ModelChoice::Url {
            base_url,
            name: cli.model_name,
        },
        None => ModelChoice::Scripted {
            rules: cli.rules,
            tool_calls: cli.scripted_tool_calls,
        },
    };
    let log_dir = cli.out.join("logs");
    std::fs::create_dir_all(&log_dir)?;
    eprintln!(
        "rover-eval: {} case(s) against {}; service logs in {}",
        selected.len(),
        match &model {
            ModelChoice::Scripted { .. } => "the scripted model".to_owned(),
            ModelChoice::Url { base_url, .. } => base_url.clone(),
        },
        log_dir.display()
    );
    let report = rover_eval::run(Options {
        model,
        cases: selected,
        subset: cli.subset,
        turn_timeout: Duration::from_secs(cli.turn_timeout),
        model_timeout_ms: cli.model_timeout_ms,
        log_dir: Some(log_dir),
        on_result: Some(progress),
    })
    .await?;
    println!("{}", report.table());
    let path = report.write(&cli.out)?;
    println!("JSON: {}", path.display());
    report.gate(cli.min_pass)?;
    Ok(())
}

//! One Rover binary as a child process: found next to the running executable, started with a
//! clean `ROVER_`/`OTEL_` environment plus the caller's and JSON logs, ready once it logs its ready
//! line, its log lines kept when asked, killed when dropped.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead as _, BufReader, Read, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What a service logs once it serves.
pub const READY: &str = "ready; waiting for shutdown";

/// The three service binaries.
pub const SERVICES: [&str; 3] = ["rover-gateway", "rover-worker", "rover-toolserver"];

/// Environment variables for a process, by name.
pub type Env = HashMap<String, String>;

/// Why a process could not be started, or did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The running executable's path is unknown, so the binaries next to it cannot be found.
    #[error("cannot find the running executable: {0}")]
    CurrentExe(std::io::Error),
    /// The binary is not built in the running executable's profile.
    #[error(
        "{name} is not built in {}: build the workspace's binaries in that profile first \
         (`cargo build --workspace --bins`, `--release` for the bench; make test, make eval and \
         make bench do)",
        dir.display()
    )]
    NotBuilt {
        /// The binary's name.
        name: String,
        /// Where it was looked for (`target/<profile>/`).
        dir: PathBuf,
    },
    /// The operating system refused to start it.
    #[error("cannot start {name}: {error}")]
    Spawn {
        /// The binary's name.
        name: String,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// Its log file could not be created.
    #[error("cannot create the log file {}: {error}", path.display())]
    LogFile {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// It closed its standard output (exited) before logging its ready line.
    #[error("{name} exited before logging {ready:?}")]
    Exited {
        /// The binary's name.
        name: String,
        /// The ready line it was expected to log.
        ready: String,
    },
    /// It did not log its ready line in time.
    #[error("{name} did not log {ready:?} within {timeout:?}")]
    NotReady {
        /// The binary's name.
        name: String,
        /// The ready line it was expected to log.
        ready: String,
        /// How long it was given.
        timeout: Duration,
    },
    /// Its ready line lacks an address the caller needs.
    #[error("{name}'s ready line has no address in {field:?}: {line}")]
    NoAddress {
        /// The binary's name.
        name: String,
        /// The field that should hold the address.
        field: String,
        /// The ready line as logged.
        line: String,
    },
}

/// The path of a workspace binary built in the running executable's profile: next to it
/// (`target/<profile>/rover-bench`, `target/<profile>/rover-eval`) or, for a test executable in
/// `target/<profile>/deps/`, one directory up.
pub fn binary(name: &str) -> Result<PathBuf, LaunchError> {
    let exe = std::env::current_exe().map_err(LaunchError::CurrentExe)?;
    let mut dir = exe.parent().unwrap_or(Path::new("."));
    if dir.ends_with("deps") {
        dir = dir.parent().unwrap_or(dir);
    }
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(LaunchError::NotBuilt {
            name: name.to_owned(),
            dir: dir.to_owned(),
        })
    }
}

/// A command for a workspace binary with a clean environment: no `ROVER_*`, `OTEL_*` or
/// `RUST_LOG` of the developer's can leak into it, and no backtraces in its output.
pub fn command(name: &str) -> Result<Command, LaunchError> {
    let mut command = Command::new(binary(name)?);
    clean(&mut command);
    Ok(command)
}

fn clean(command: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(name) = key.to_str() else { continue };
        if name.starts_with("ROVER_") || name.starts_with("OTEL_") || name == "RUST_LOG" {
            command.env_remove(&key);
        }
    }
    command.env("RUST_BACKTRACE", "0");
}

/// What to start: a binary, its flags and environment, and the log line that says it is ready.
#[derive(Debug, Clone)]
pub struct Spawn {
    name: String,
    args: Vec<String>,
    env: Env,
    ready: String,
}

impl Spawn {
    /// A service (gateway, worker, tool server): ready when it logs [`READY`].
    pub fn service(name: &str) -> Spawn {
        Spawn::new(name, READY)
    }

    /// Any workspace binary, ready when it logs a line containing `ready`.
    pub fn new(name: &str, ready: &str) -> Spawn {
        Spawn {
            name: name.to_owned(),
            args: Vec::new(),
            env: Env::new(),
            ready: ready.to_owned(),
        }
    }

    /// Adds command-line arguments.
    pub fn args<S: AsRef<str>>(mut self, args: impl IntoIterator<Item = S>) -> Spawn {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Adds environment variables (later ones win).
    pub fn envs<K: AsRef<str>, V: AsRef<str>>(
        mut self,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Spawn {
        self.env.extend(
            env.into_iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned())),
        );
        self
    }

    /// The binary's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A program one service runs under (a profiler), and its arguments before the binary's path.
#[derive(Debug, Clone)]
struct Wrapper {
    service: String,
    program: String,
    args: Vec<String>,
}

/// How processes are started: where their logs go, how long they may take to become ready, and
/// whether one runs under a wrapper.
#[derive(Debug, Clone)]
pub struct Launcher {
    log_dir: Option<PathBuf>,
    quiet: bool,
    ready_timeout: Duration,
    wrapper: Option<Wrapper>,
}

impl Default for Launcher {
    fn default() -> Self {
        Launcher::new()
    }
}

impl Launcher {
    /// Standard error shown with the caller's, 30 s to become ready, and every process's log
    /// lines kept in `ROVER_TEST_LOG_DIR` when that is set (for a failure worth reading).
    pub fn new() -> Launcher {
        Launcher {
            log_dir: std::env::var_os("ROVER_TEST_LOG_DIR").map(PathBuf::from),
            quiet: false,
            ready_timeout: Duration::from_secs(30),
            wrapper: None,
        }
    }

    /// Keeps each process's log lines in `dir/<name>-<pid>.log` (none when `None`).
    pub fn log_dir(mut self, dir: Option<PathBuf>) -> Launcher {
        self.log_dir = dir;
        self
    }

    /// Keeps the processes' standard error out of the caller's: it goes to their log files (or
    /// nowhere, without a log directory).
    pub fn quiet(mut self) -> Launcher {
        self.quiet = true;
        self
    }

    /// How long a process may take to log its ready line.
    pub fn ready_timeout(mut self, timeout: Duration) -> Launcher {
        self.ready_timeout = timeout;
        self
    }

    /// Runs `service` as `program args… <binary> <its args…>` wherever this launcher starts it
    /// (a profiler), and stops it with SIGTERM before killing it, so the wrapper can write its
    /// output.
    pub fn wrap<S: AsRef<str>>(
        mut self,
        service: &str,
        program: &str,
        args: impl IntoIterator<Item = S>,
    ) -> Launcher {
        self.wrapper = Some(Wrapper {
            service: service.to_owned(),
            program: program.to_owned(),
            args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
        });
        self
    }

    /// Starts `spawn` and waits until it logs its ready line; returns it with that line.
    pub fn spawn(&self, spawn: &Spawn) -> Result<(Process, Ready), LaunchError> {
        let name = spawn.name.clone();
        let binary = binary(&name)?;
        let wrapper = self.wrapper.as_ref().filter(|w| w.service == name);
        let mut command = match wrapper {
            Some(wrapper) => {
                let mut command = Command::new(&wrapper.program);
                command.args(&wrapper.args).arg(&binary);
                command
            }
            None => Command::new(&binary),
        };
        clean(&mut command);
        let mut child = command
            .args(&spawn.args)
            .envs(&spawn.env)
            .env("ROVER_TELEMETRY__FORMAT", "json")
            .stdout(Stdio::piped())
            .stderr(if self.quiet {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .map_err(|error| LaunchError::Spawn {
                name: name.clone(),
                error,
            })?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let process = Process {
            name: name.clone(),
            child,
            sigterm_first: wrapper.is_some(),
        };
        let log = match &self.log_dir {
            Some(dir) => {
                let path = dir.join(format!("{name}-{}.log", process.id()));
                let file = File::create(&path).map_err(|error| LaunchError::LogFile {
                    path: path.clone(),
                    error,
                })?;
                Some(Arc::new(Mutex::new(file)))
            }
            None => None,
        };
        if let Some(stderr) = stderr {
            let log = log.clone();
            std::thread::spawn(move || forward(stderr, log.as_deref(), None));
        }
        let (tx, rx) = mpsc::channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || forward(stdout, log.as_deref(), Some(&tx)));
        }
        let deadline = Instant::now() + self.ready_timeout;
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) if line.contains(&spawn.ready) => {
                    let value = serde_json::from_str(&line).unwrap_or(Value::Null);
                    return Ok((process, Ready { name, line, value }));
                }
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(LaunchError::Exited {
                        name,
                        ready: spawn.ready.clone(),
                    });
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(LaunchError::NotReady {
                        name,
                        ready: spawn.ready.clone(),
                        timeout: self.ready_timeout,
                    });
                }
            }
        }
    }
}

/// Reads `pipe` to its end, line by line: into `log` when kept, and to `lines` while the receiver
/// listens. Draining on after the receiver is gone keeps the child from blocking on a full pipe.
fn forward(pipe: impl Read, log: Option<&Mutex<File>>, lines: Option<&mpsc::Sender<String>>) {
    for line in BufReader::new(pipe).lines().map_while(Result::ok) {
        if let Some(log) = log
            && let Ok(mut file) = log.lock()
        {
            let _ = writeln!(file, "{line}");
        }
        if let Some(lines) = lines {
            let _ = lines.send(line);
        }
    }
}

/// The ready line a process logged, parsed (JSON logs; `null` if it was not JSON).
#[derive(Debug, Clone)]
pub struct Ready {
    name: String,
    line: String,
    value: Value,
}

impl Ready {
    /// The line's fields.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The socket address in the line's `field` (`listen`, `metrics`, `http`, `addr`).
    pub fn addr(&self, field: &str) -> Result<SocketAddr, LaunchError> {
        self.value[field]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| LaunchError::NoAddress {
                name: self.name.clone(),
                field: field.to_owned(),
                line: self.line.clone(),
            })
    }
}

/// A running child process, killed (and reaped) when dropped.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    /// Runs under a wrapper: stopped with SIGTERM first, so the wrapper writes its output.
    sigterm_first: bool,
}

impl Process {
    /// Takes charge of a child started some other way (a test reading all of its output): it is
    /// killed when the returned value is dropped.
    pub fn adopt(name: &str, child: Child) -> Process {
        Process {
            name: name.to_owned(),
            child,
            sigterm_first: false,
        }
    }

    /// The binary's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`TERM`, `KILL`, …) with `kill`.
    pub fn signal(&self, signal: &str) -> std::io::Result<()> {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.id().to_string()])
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "kill -{signal} {} ({}) failed: {status}",
                self.id(),
                self.name
            )))
        }
    }

    /// Waits for the process to exit; its exit status.
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.sigterm_first && self.signal("TERM").is_ok() {
            let _ = self.child.wait();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

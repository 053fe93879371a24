//! Typed, layered settings for Rover's services.
//!
//! Each service declares one `Settings` struct out of the sections here. Values are layered:
//! the struct's defaults, then a TOML file, then `ROVER_`-prefixed environment variables with `__`
//! for nesting (`ROVER_AMQP__URL` sets `amqp.url`). Secrets are wrapped in [`Secret`], which prints
//! as `********` in logs, `Debug` output and `--print-config`.
//!
//! Every section is `#[serde(default)]`, so a layer only names what it changes.

mod backoff;
pub mod fault;
mod secret;
mod sections;

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::de::DeserializeOwned;

pub use backoff::Backoff;
pub use secret::Secret;
pub use sections::*;

/// The environment variable prefix of every Rover setting.
pub const ENV_PREFIX: &str = "ROVER_";

/// Settings could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The named file does not exist.
    #[error("settings file {0} does not exist")]
    MissingFile(String),
    /// A layer holds a value of the wrong type, or the file is not valid TOML.
    #[error("invalid settings: {0}")]
    Invalid(Box<figment::Error>),
}

/// The layered sources for `S`: defaults, the TOML file if given, then `ROVER_…` variables.
pub fn figment(file: Option<&Path>) -> Result<Figment, SettingsError> {
    let mut figment = Figment::new();
    if let Some(path) = file {
        if !path.is_file() {
            return Err(SettingsError::MissingFile(path.display().to_string()));
        }
        figment = figment.merge(Toml::file_exact(path));
    }
    Ok(figment.merge(Env::prefixed(ENV_PREFIX).split("__")))
}

/// Loads `S` from defaults, the TOML file if given, and the environment.
pub fn load<S: DeserializeOwned>(file: Option<&Path>) -> Result<S, SettingsError> {
    figment(file)?
        .extract()
        .map_err(|e| SettingsError::Invalid(Box::new(e)))
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's closures return figment::Error.
mod tests {
    use super::*;
    use figment::Jail;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(default)]
    struct Example {
        amqp: AmqpSettings,
        database: DatabaseSettings,
        telemetry: TelemetrySettings,
    }

    #[test]
    fn defaults_then_file_then_environment() {
        Jail::expect_with(|jail| {
            jail.create_file(
                "rover.toml",
                "[amqp]\nprefix = \"from-file\"\nprefetch = 3\n[telemetry]\nformat = \"json\"\n",
            )?;
            jail.set_env("ROVER_AMQP__PREFETCH", "7");
            jail.set_env("ROVER_DATABASE__URL", "postgres://app:hunter2@db/rover");
            let s: Example = load(Some(Path::new("rover.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(s.amqp.prefix, "from-file", "file overrides the default");
            assert_eq!(s.amqp.prefetch, 7, "environment overrides the file");
            assert_eq!(s.telemetry.format, LogFormat::Json);
            assert_eq!(s.database.url.expose(), "postgres://app:hunter2@db/rover");
            assert_eq!(
                s.amqp.delivery_limit,
                AmqpSettings::default().delivery_limit,
                "untouched values keep their default"
            );
            Ok(())
        });
    }

    #[test]
    fn a_missing_file_and_a_bad_value_are_clear_errors() {
        Jail::expect_with(|jail| {
            let missing = load::<Example>(Some(Path::new("nope.toml"))).unwrap_err();
            assert_eq!(
                missing.to_string(),
                "settings file nope.toml does not exist"
            );
            jail.set_env("ROVER_AMQP__PREFETCH", "lots");
            let bad = load::<Example>(None).unwrap_err().to_string();
            assert!(
                bad.to_lowercase().contains("amqp.prefetch") && bad.contains("lots"),
                "{bad}"
            );
            Ok(())
        });
    }

    #[test]
    fn broker_addresses_come_as_a_list_or_comma_separated() {
        Jail::expect_with(|jail| {
            let s: Example = load(None).map_err(|e| e.to_string())?;
            assert!(s.amqp.addresses.is_empty(), "one node by default");
            jail.create_file(
                "rover.toml",
                "[amqp]\naddresses = [\"rabbit-0:5672\", \"rabbit-1:5672\"]\n",
            )?;
            let s: Example = load(Some(Path::new("rover.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(s.amqp.addresses, ["rabbit-0:5672", "rabbit-1:5672"]);
            jail.set_env(
                "ROVER_AMQP__ADDRESSES",
                "127.0.0.1:5681, 127.0.0.1:5682,127.0.0.1:5683",
            );
            let s: Example = load(Some(Path::new("rover.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(
                s.amqp.addresses,
                ["127.0.0.1:5681", "127.0.0.1:5682", "127.0.0.1:5683"]
            );
            Ok(())
        });
    }

    #[test]
    fn secrets_never_print() {
        Jail::expect_with(|jail| {
            jail.set_env("ROVER_DATABASE__URL", "postgres://app:hunter2@db/rover");
            let s: Example = load(None).map_err(|e| e.to_string())?;
            let printed = [
                format!("{s:?}"),
                toml::to_string(&s).map_err(|e| e.to_string())?,
                serde_json::to_string(&s).map_err(|e| e.to_string())?,
            ];
            for text in printed {
                assert!(!text.contains("hunter2"), "secret leaked: {text}");
                assert!(text.contains("********"));
            }
            Ok(())
        });
    }
}

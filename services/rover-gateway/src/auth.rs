//! Bearer-token authentication: a JWT verified with one pinned algorithm becomes a [`Principal`].
//!
//! The key is an HS256 secret (development), a PEM public key, or a JWKS fetched on first use and
//! cached by `kid`. Every rejection is a 401 with a short, fixed reason; the token itself is never
//! echoed or logged. A client address with too many rejected tokens in a window gets 429 instead
//! of 401 for them (see [`crate::limits::FailureLimiter`]); a valid token always passes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rover_contracts::ErrorCode;
use rover_contracts::ids::UserId;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::limits::FailureLimiter;
use crate::settings::AuthSettings;

/// The built-in HS256 secret of development mode (`auth.development = true`). It is printed here,
/// so anyone can sign tokens with it: outside development mode it is refused, even when configured.
pub const DEVELOPMENT_HS256_SECRET: &str = "rover-development-secret-change-me";

/// The shortest HS256 secret accepted, in bytes.
const MIN_HS256_SECRET_BYTES: usize = 16;
/// Longer "tokens" are refused before any parsing.
const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// Longest `kid` accepted; anything longer is refused without a JWKS fetch.
const MAX_KID_CHARS: usize = 128;
/// Deadline of one JWKS fetch.
const JWKS_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest JWKS document accepted.
const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// Minimum time between two JWKS refetches triggered by unknown `kid`s.
const JWKS_REFETCH_COOLDOWN: Duration = Duration::from_secs(60);

/// An authenticated caller: the token's subject, a user id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Principal {
    /// The user the token was issued to.
    pub user_id: UserId,
}

/// The audiences a route requires of a bearer token instead of `auth.audience` (RFC 8707: a token
/// for `/mcp` names that resource), put into the request's extensions before [`Principal`] is
/// extracted.
#[derive(Debug, Clone)]
pub struct Audiences(pub Vec<String>);

/// Verifies bearer tokens with the configured, pinned algorithm.
#[derive(Debug)]
pub struct Authenticator {
    /// The only algorithm a token may be signed with.
    algorithm: Algorithm,
    /// `exp`, `nbf`, `iss`, `aud` and `sub` checks, and the pinned algorithm again.
    validation: Validation,
    /// Where verification keys come from.
    keys: Keys,
    /// Rejected tokens per client address.
    failures: FailureLimiter,
}

/// The source of verification keys.
#[derive(Debug)]
enum Keys {
    /// One key: the HS256 secret or a PEM public key.
    Fixed(DecodingKey),
    /// Keys chosen by `kid` from a remote key set.
    Jwks(Jwks),
}

impl Authenticator {
    /// Builds the verifier from settings, failing at start-up on anything that would make every
    /// request fail later: an unknown algorithm, a missing or short HS256 secret, an unreadable
    /// public key, both or neither of `public_key_file` and `jwks_url`, an empty issuer or audience.
    pub fn new(settings: &AuthSettings) -> anyhow::Result<Self> {
        let algorithm = pinned_algorithm(&settings.algorithm)?;
        ensure!(!settings.issuer.is_empty(), "auth.issuer must not be empty");
        ensure!(
            !settings.audience.is_empty(),
            "auth.audience must not be empty"
        );
        let keys = match algorithm {
            Algorithm::HS256 => {
                ensure!(
                    settings.public_key_file.is_none() && settings.jwks_url.is_none(),
                    "auth.public_key_file and auth.jwks_url are not used with HS256; unset them or \
                     change auth.algorithm"
                );
                let secret = hs256_secret(settings)?;
                Keys::Fixed(
                    DecodingKey::from_secret(secret).context("Failed to load the HS256 secret")?,
                )
            }
            _ => match (&settings.public_key_file, &settings.jwks_url) {
                (Some(path), None) => {
                    let pem = std::fs::read(path).with_context(|| {
                        format!("Failed to read auth.public_key_file {}", path.display())
                    })?;
                    let key = match algorithm {
                        Algorithm::RS256 => DecodingKey::from_rsa_pem(&pem),
                        Algorithm::ES256 => DecodingKey::from_ec_pem(&pem),
                        _ => DecodingKey::from_ed_pem(&pem),
                    }
                    .with_context(|| {
                        format!(
                            "auth.public_key_file {} is not a PEM {} public key",
                            path.display(),
                            settings.algorithm
                        )
                    })?;
                    Keys::Fixed(key)
                }
                (None, Some(url)) => Keys::Jwks(Jwks::new(url, algorithm)?),
                (Some(_), Some(_)) => {
                    bail!("set only one of auth.public_key_file and auth.jwks_url")
                }
                (None, None) => bail!(
                    "auth.algorithm = {} needs auth.public_key_file or auth.jwks_url",
                    settings.algorithm
                ),
            },
        };
        let mut validation = Validation::new(algorithm);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[&settings.audience]);
        validation.leeway = settings.leeway_secs;
        let failures = FailureLimiter::new(
            settings.max_failures_per_window,
            Duration::from_secs(settings.failure_window_secs.max(1)),
            settings.failure_clients_tracked,
        );
        Ok(Self {
            algorithm,
            validation,
            keys,
            failures,
        })
    }

    /// [`Self::authenticate`] for a request from `client`. The token is verified first, so a
    /// valid one always passes, whatever others at the same address did; a rejected one counts
    /// against `client`, and once it has too many in the current window its rejections are
    /// `rate_limited` (429, `Retry-After`) instead of 401. Verifying first costs little: an HS256
    /// or PEM-key check is cheap, and a JWKS is refetched at most once per cooldown. Without a
    /// client address (an in-process request) nothing is limited.
    pub async fn authenticate_from(
        &self,
        headers: &HeaderMap,
        client: Option<IpAddr>,
        audiences: Option<&Audiences>,
    ) -> Result<Principal, ApiError> {
        let result = self.authenticate_for(headers, audiences).await;
        let (Err(rejection), Some(client)) = (&result, client) else {
            return result;
        };
        let now = Instant::now();
        if let Err(wait) = self.failures.check(client, now) {
            tracing::debug!(%client, "too many rejected tokens from this client");
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                "Too many requests with invalid credentials. Please wait and try again.",
            )
            .retry_after(wait));
        }
        self.failures.record_failure(client, now);
        Err(rejection.clone())
    }

    /// Checks the `Authorization: Bearer …` header and returns the token's subject. A rejection is
    /// a 401 whose message is a short reason such as "token expired" or "wrong audience".
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        self.authenticate_for(headers, None).await
    }

    /// [`Self::authenticate`], requiring one of `audiences` (else `auth.audience`) in `aud`.
    #[tracing::instrument(skip_all)]
    pub async fn authenticate_for(
        &self,
        headers: &HeaderMap,
        audiences: Option<&Audiences>,
    ) -> Result<Principal, ApiError> {
        match self.verify(headers, audiences).await {
            Ok(principal) => {
                tracing::debug!(user_id = %principal.user_id, "bearer token accepted");
                Ok(principal)
            }
            Err(reason) => {
                tracing::debug!(reason, "bearer token rejected");
                Err(ApiError::unauthenticated(reason))
            }
        }
    }

    async fn verify(
        &self,
        headers: &HeaderMap,
        audiences: Option<&Audiences>,
    ) -> Result<Principal, &'static str> {
        let token = bearer_token(headers)?;
        let header = peek_header(token)?;
        if header.alg != algorithm_name(self.algorithm) {
            return Err("algorithm not allowed");
        }
        let bound;
        let validation = match audiences {
            Some(Audiences(audiences)) => {
                let mut validation = self.validation.clone();
                validation.set_audience(audiences);
                bound = validation;
                &bound
            }
            None => &self.validation,
        };
        let data = match &self.keys {
            Keys::Fixed(key) => jsonwebtoken::decode::<Claims>(token, key, validation),
            Keys::Jwks(jwks) => {
                let key = jwks.key(header.kid.as_deref()).await?;
                jsonwebtoken::decode::<Claims>(token, &key, validation)
            }
        }
        .map_err(|error| reason(error.kind()))?;
        let sub = data.claims.sub.ok_or("missing sub claim")?;
        let user_id = UserId::parse(&sub).map_err(|_| "invalid subject")?;
        Ok(Principal { user_id })
    }
}

/// Mints an HS256 development token for `user`: `sub` = the user id, `email`, `iss` and `aud` from
/// settings, `iat` = `nbf` = `now`, `exp` = `now` + `dev_token_ttl_secs`. Refuses unless the
/// gateway is configured for HS256, so it can never mint tokens a production gateway would accept
/// from anyone else.
pub fn dev_token(
    settings: &AuthSettings,
    user: UserId,
    email: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    ensure!(
        settings.algorithm == "HS256",
        "rover-gateway token only mints HS256 development tokens; configure auth.algorithm = HS256"
    );
    let secret = hs256_secret(settings)?;
    let ttl = i64::try_from(settings.dev_token_ttl_secs)
        .context("auth.dev_token_ttl_secs is too large")?;
    let now = now.timestamp();
    let claims = DevClaims {
        sub: user.to_string(),
        email,
        iss: &settings.issuer,
        aud: &settings.audience,
        iat: now,
        nbf: now,
        exp: now
            .checked_add(ttl)
            .context("auth.dev_token_ttl_secs is too large")?,
    };
    let key = EncodingKey::from_secret(secret).context("Failed to load the HS256 secret")?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)
        .context("Failed to sign the development token")
}

/// The claims read from a token; the registered ones are checked by [`Validation`].
#[derive(Deserialize)]
struct Claims {
    /// Optional here so that a missing `sub` is reported as such by the validation.
    sub: Option<String>,
}

/// The claims of a development token.
#[derive(Serialize)]
struct DevClaims<'a> {
    sub: String,
    email: &'a str,
    iss: &'a str,
    aud: &'a str,
    iat: i64,
    nbf: i64,
    exp: i64,
}

/// The parts of a JOSE header read before verification. Parsed by hand rather than with
/// [`jsonwebtoken::decode_header`] so that `alg: none` and other unknown names are reported as
/// "algorithm not allowed" rather than as a malformed token.
#[derive(Deserialize)]
struct PeekedHeader {
    alg: String,
    kid: Option<String>,
}

fn pinned_algorithm(name: &str) -> anyhow::Result<Algorithm> {
    Ok(match name {
        "HS256" => Algorithm::HS256,
        "RS256" => Algorithm::RS256,
        "ES256" => Algorithm::ES256,
        "EdDSA" => Algorithm::EdDSA,
        other => bail!("auth.algorithm must be one of HS256, RS256, ES256, EdDSA (got `{other}`)"),
    })
}

fn algorithm_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::HS256 => "HS256",
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        Algorithm::EdDSA => "EdDSA",
        // Never pinned (see `pinned_algorithm`); no header can name this.
        _ => "\0",
    }
}

/// The HS256 key: the configured secret, or the built-in one in development mode only. The
/// built-in secret is public, so outside development mode it is refused even when configured.
fn hs256_secret(settings: &AuthSettings) -> anyhow::Result<&[u8]> {
    let secret = match &settings.hs256_secret {
        Some(secret) => secret.expose().as_str(),
        None if settings.development => DEVELOPMENT_HS256_SECRET,
        None => bail!(
            "auth.algorithm = HS256 needs auth.hs256_secret (ROVER_AUTH__HS256_SECRET); the \
             built-in development secret is used only in development mode \
             (auth.development = true, ROVER_AUTH__DEVELOPMENT=true)"
        ),
    };
    ensure!(
        settings.development || secret != DEVELOPMENT_HS256_SECRET,
        "auth.hs256_secret is the built-in development secret, which is public: refused outside \
         development mode (auth.development = true); configure a secret of your own"
    );
    ensure!(
        secret.len() >= MIN_HS256_SECRET_BYTES,
        "auth.hs256_secret must be at least {MIN_HS256_SECRET_BYTES} bytes long"
    );
    Ok(secret.as_bytes())
}

/// The token of the single `Authorization: Bearer <token>` header (scheme case-insensitive).
fn bearer_token(headers: &HeaderMap) -> Result<&str, &'static str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or("missing bearer token")?;
    if values.next().is_some() {
        return Err("malformed token");
    }
    let value = value.to_str().map_err(|_| "malformed token")?;
    let (scheme, token) = value.split_once(' ').ok_or("missing bearer token")?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("missing bearer token");
    }
    let token = token.trim();
    if token.is_empty() {
        return Err("missing bearer token");
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err("malformed token");
    }
    Ok(token)
}

/// Reads the header of a compact JWS without verifying anything.
fn peek_header(token: &str) -> Result<PeekedHeader, &'static str> {
    let mut parts = token.split('.');
    let (Some(header), Some(_payload), Some(_signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed token");
    };
    let json = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| "malformed token")?;
    serde_json::from_slice(&json).map_err(|_| "malformed token")
}

/// The short reason for a verification failure.
fn reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat => "invalid signature",
        ErrorKind::InvalidAlgorithm
        | ErrorKind::MissingAlgorithm
        | ErrorKind::UnsupportedAlgorithm => "algorithm not allowed",
        ErrorKind::ExpiredSignature => "token expired",
        ErrorKind::ImmatureSignature => "token not yet valid",
        ErrorKind::InvalidAudience => "wrong audience",
        ErrorKind::InvalidIssuer => "wrong issuer",
        ErrorKind::MissingRequiredClaim(claim) => match claim.as_str() {
            "exp" => "missing exp claim",
            "iss" => "missing iss claim",
            "aud" => "missing aud claim",
            "sub" => "missing sub claim",
            _ => "missing claim",
        },
        _ => "malformed token",
    }
}

/// Whether a `kid` is safe to look up (and to log): `[A-Za-z0-9._-]{1,128}`.
fn is_plain_kid(kid: &str) -> bool {
    (1..=MAX_KID_CHARS).contains(&kid.len())
        && kid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A remote key set, fetched on first use and cached by `kid`.
///
/// A token with an unknown `kid` triggers at most one refetch per cooldown (the first-use fetch
/// does not count; a failed one does), and fetches never overlap: however many such tokens
/// arrive, alone or at once, the key-set endpoint sees no storm.
#[derive(Debug)]
struct Jwks {
    url: reqwest::Url,
    client: reqwest::Client,
    algorithm: Algorithm,
    /// The usable keys by `kid`, read on every request; never held across an `.await`.
    keys: RwLock<HashMap<String, DecodingKey>>,
    /// Held while deciding whether to fetch and while fetching, so fetches never overlap.
    fetches: tokio::sync::Mutex<FetchHistory>,
}

#[derive(Debug, Default)]
struct FetchHistory {
    /// Whether the first-use fetch has been tried.
    tried: bool,
    /// When the last refetch (or failed first-use fetch) started.
    last_refetch: Option<Instant>,
}

impl Jwks {
    fn new(url: &str, algorithm: Algorithm) -> anyhow::Result<Self> {
        let url = reqwest::Url::parse(url)
            .with_context(|| format!("auth.jwks_url `{url}` is not a URL"))?;
        let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
        ensure!(
            url.scheme() == "https" || (url.scheme() == "http" && loopback),
            "auth.jwks_url must use https (plain http only for localhost)"
        );
        let client = reqwest::Client::builder()
            .timeout(JWKS_TIMEOUT)
            .build()
            .context("Failed to build the JWKS HTTP client")?;
        Ok(Self {
            url,
            client,
            algorithm,
            keys: RwLock::default(),
            fetches: tokio::sync::Mutex::default(),
        })
    }

    /// The key for `kid`, fetching the key set on first use or, at most once per cooldown, when
    /// `kid` is unknown.
    async fn key(&self, kid: Option<&str>) -> Result<DecodingKey, &'static str> {
        let kid = kid.ok_or("unknown key")?;
        if !is_plain_kid(kid) {
            return Err("malformed token");
        }
        if let Some(key) = self.cached(kid) {
            return Ok(key);
        }
        let mut history = self.fetches.lock().await;
        // The fetch this request waited for may have brought the key.
        if let Some(key) = self.cached(kid) {
            return Ok(key);
        }
        let first_use = !history.tried;
        if !first_use {
            if history
                .last_refetch
                .is_some_and(|at| at.elapsed() < JWKS_REFETCH_COOLDOWN)
            {
                return Err("unknown key");
            }
            history.last_refetch = Some(Instant::now());
        }
        history.tried = true;
        match self.load().await {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), %kid, "fetched the JWKS");
                *self.keys.write().unwrap_or_else(PoisonError::into_inner) = keys;
            }
            Err(error) => {
                if first_use {
                    history.last_refetch = Some(Instant::now());
                }
                tracing::warn!(error = format!("{error:#}"), "failed to fetch the JWKS");
            }
        }
        drop(history);
        self.cached(kid).ok_or("unknown key")
    }

    fn cached(&self, kid: &str) -> Option<DecodingKey> {
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        keys.get(kid).cloned()
    }

    /// Fetches the key set and keeps the keys that fit the pinned algorithm.
    #[tracing::instrument(skip_all, fields(url = %self.url))]
    async fn load(&self) -> anyhow::Result<HashMap<String, DecodingKey>> {
        let response = self
            .client
            .get(self.url.clone())
            .send()
            .await
            .context("Failed to request the JWKS")?
            .error_for_status()
            .context("The JWKS endpoint answered with an error")?;
        ensure!(
            response
                .content_length()
                .is_none_or(|len| len <= MAX_JWKS_BYTES as u64),
            "the JWKS is larger than {MAX_JWKS_BYTES} bytes"
        );
        let body = response.bytes().await.context("Failed to read the JWKS")?;
        ensure!(
            body.len() <= MAX_JWKS_BYTES,
            "the JWKS is larger than {MAX_JWKS_BYTES} bytes"
        );
        let set: RawKeySet =
            serde_json::from_slice(&body).context("The JWKS is not a JSON key set")?;
        Ok(set
            .keys
            .into_iter()
            // A key this crate cannot parse is skipped, not fatal: the set may hold other kinds.
            .filter_map(|key| serde_json::from_value::<Jwk>(key).ok())
            .filter(|jwk| fits(jwk, self.algorithm))
            .filter_map(|jwk| {
                let kid = jwk.common.key_id.clone().filter(|kid| is_plain_kid(kid))?;
                Some((kid, DecodingKey::from_jwk(&jwk).ok()?))
            })
            .collect())
    }
}

/// A key set whose keys are parsed one by one.
#[derive(Deserialize)]
struct RawKeySet {
    keys: Vec<serde_json::Value>,
}

/// Whether a JWK may verify tokens of the pinned algorithm: its `kty` (and curve) match, its `alg`
/// (if any) is the pinned one, and its `use` (if any) is `sig`.
fn fits(jwk: &Jwk, algorithm: Algorithm) -> bool {
    let (key_algorithm, kind_fits) = match (algorithm, &jwk.algorithm) {
        (Algorithm::RS256, AlgorithmParameters::RSA(_)) => (KeyAlgorithm::RS256, true),
        (Algorithm::ES256, AlgorithmParameters::EllipticCurve(ec)) => {
            (KeyAlgorithm::ES256, ec.curve == EllipticCurve::P256)
        }
        (Algorithm::EdDSA, AlgorithmParameters::OctetKeyPair(okp)) => {
            (KeyAlgorithm::EdDSA, okp.curve == EllipticCurve::Ed25519)
        }
        _ => return false,
    };
    kind_fits
        && jwk
            .common
            .key_algorithm
            .is_none_or(|alg| alg == key_algorithm)
        && jwk
            .common
            .public_key_use
            .as_ref()
            .is_none_or(|usage| *usage == PublicKeyUse::Signature)
}

//! The signed turn identity: the caller's identity and call scope, signed by the gateway's Ed25519
//! key. The tool server verifies signature and expiry before it does anything else, so neither the
//! model nor anything else that can publish to the broker can act as someone else.
//!
//! *API Boundary*: [`TurnVerifier::verify`] is the only way to obtain a [`VerifiedTurnIdentity`].

use chrono::{DateTime, Duration, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, errors::ErrorKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::{CallScope, Identity};
use crate::ids::{ThreadId, TurnId};

const ISSUER: &str = "rover-gateway";
const AUDIENCE: &str = "rover-toolserver";

/// A turn identity as it travels: a compact JWS (EdDSA). Opaque until verified.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct SignedTurnIdentity(String);

impl SignedTurnIdentity {
    /// Wraps a token received from elsewhere (it is checked only by [`TurnVerifier::verify`]).
    pub fn from_token(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The compact token.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SignedTurnIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignedTurnIdentity(…)")
    }
}

/// What the gateway grants a turn: who, in what scope, for which turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnGrant {
    /// The turn.
    pub turn_id: TurnId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// Who the turn acts as.
    pub identity: Identity,
    /// How far it reaches.
    pub scope: CallScope,
}

/// A staff member's approval of one write, carried in the identity of the call it approves: the
/// gateway signs it after the staff member said yes in their MCP client (chat approvals are rows in
/// Postgres instead). The tool server runs a write whose policy needs approval only if this names
/// the very call id and the exact input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovedCall {
    /// The call id on the wire (`<turn>/<call>`).
    pub call_id: crate::ids::ToolCallId,
    /// The arguments approved, exactly.
    pub input: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Claims {
    iss: String,
    aud: String,
    sub: String,
    iat: i64,
    exp: i64,
    turn: TurnId,
    thread: ThreadId,
    identity: Identity,
    scope: CallScope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approved: Option<ApprovedCall>,
}

/// Why a key could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("invalid Ed25519 {which} key: {source}")]
pub struct KeyError {
    which: &'static str,
    source: jsonwebtoken::errors::Error,
}

/// Why a turn identity was refused. The text is safe to show; it never echoes the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// Not a well-formed token of the expected shape.
    #[error("turn identity is malformed")]
    Malformed,
    /// The signature does not verify with the gateway's key (forged, tampered or another key).
    #[error("turn identity signature is invalid")]
    BadSignature,
    /// Past its expiry.
    #[error("turn identity has expired")]
    Expired,
    /// Not issued by the gateway for the tool server.
    #[error("turn identity was not issued for this service")]
    WrongAudience,
    /// Valid for longer than the verifier allows.
    #[error("turn identity lifetime exceeds the allowed maximum")]
    TooLong,
    /// The identity's tenant and the scope's tenant differ.
    #[error("turn identity and call scope name different schools")]
    Inconsistent,
}

/// Signs turn identities. Only the gateway holds one.
pub struct TurnSigner {
    key: EncodingKey,
}

impl std::fmt::Debug for TurnSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnSigner(…)")
    }
}

impl TurnSigner {
    /// From a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`, as `openssl genpkey -algorithm ed25519` writes).
    pub fn from_pem(pem: &[u8]) -> Result<Self, KeyError> {
        EncodingKey::from_ed_pem(pem)
            .map(|key| Self { key })
            .map_err(|source| KeyError {
                which: "private",
                source,
            })
    }

    /// From a PKCS#8 DER private key.
    pub fn from_pkcs8_der(der: &[u8]) -> Self {
        Self {
            key: EncodingKey::from_ed_der(der),
        }
    }

    /// Signs `grant`, valid from `issued_at` for `ttl`.
    pub fn mint(
        &self,
        grant: TurnGrant,
        issued_at: DateTime<Utc>,
        ttl: Duration,
    ) -> Result<SignedTurnIdentity, KeyError> {
        self.sign(grant, None, issued_at, ttl)
    }

    /// A secret derived from the private key for `label`: the key's (deterministic, RFC 8032)
    /// Ed25519 signature of the label, so every replica holding the key derives the same secret
    /// and no one without it can.
    pub fn derive_secret(&self, label: &str) -> Result<Vec<u8>, KeyError> {
        jsonwebtoken::crypto::sign(label.as_bytes(), &self.key, Algorithm::EdDSA)
            .map(String::into_bytes)
            .map_err(|source| KeyError {
                which: "private",
                source,
            })
    }

    /// Signs `grant` with the staff member's approval of one write of its turn.
    pub fn mint_approved(
        &self,
        grant: TurnGrant,
        approved: ApprovedCall,
        issued_at: DateTime<Utc>,
        ttl: Duration,
    ) -> Result<SignedTurnIdentity, KeyError> {
        self.sign(grant, Some(approved), issued_at, ttl)
    }

    fn sign(
        &self,
        grant: TurnGrant,
        approved: Option<ApprovedCall>,
        issued_at: DateTime<Utc>,
        ttl: Duration,
    ) -> Result<SignedTurnIdentity, KeyError> {
        let claims = Claims {
            iss: ISSUER.to_owned(),
            aud: AUDIENCE.to_owned(),
            sub: grant.identity.user_id.to_string(),
            iat: issued_at.timestamp(),
            exp: (issued_at + ttl).timestamp(),
            turn: grant.turn_id,
            thread: grant.thread_id,
            identity: grant.identity,
            scope: grant.scope,
            approved,
        };
        jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), &claims, &self.key)
            .map(SignedTurnIdentity)
            .map_err(|source| KeyError {
                which: "private",
                source,
            })
    }
}

/// Verifies turn identities with the gateway's public key. Holding one does not allow minting.
#[derive(Clone)]
pub struct TurnVerifier {
    key: DecodingKey,
    validation: Validation,
    max_lifetime: Duration,
}

impl std::fmt::Debug for TurnVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnVerifier")
            .field("max_lifetime", &self.max_lifetime)
            .finish_non_exhaustive()
    }
}

impl TurnVerifier {
    /// Clock skew tolerated on expiry, in seconds.
    pub const LEEWAY_SECS: u64 = 5;

    /// From an SPKI PEM public key (`-----BEGIN PUBLIC KEY-----`).
    pub fn from_pem(pem: &[u8], max_lifetime: Duration) -> Result<Self, KeyError> {
        let key = DecodingKey::from_ed_pem(pem).map_err(|source| KeyError {
            which: "public",
            source,
        })?;
        Ok(Self::with_key(key, max_lifetime))
    }

    /// From the raw 32-byte Ed25519 public key.
    pub fn from_public_key_bytes(bytes: &[u8], max_lifetime: Duration) -> Self {
        Self::with_key(DecodingKey::from_ed_der(bytes), max_lifetime)
    }

    fn with_key(key: DecodingKey, max_lifetime: Duration) -> Self {
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.leeway = Self::LEEWAY_SECS;
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
        Self {
            key,
            validation,
            max_lifetime,
        }
    }

    /// Checks signature, issuer, audience, expiry, lifetime and tenant consistency.
    pub fn verify(
        &self,
        token: &SignedTurnIdentity,
    ) -> Result<VerifiedTurnIdentity, IdentityError> {
        let data =
            jsonwebtoken::decode::<Claims>(&token.0, &self.key, &self.validation).map_err(|e| {
                match e.kind() {
                    ErrorKind::ExpiredSignature => IdentityError::Expired,
                    ErrorKind::InvalidSignature
                    | ErrorKind::InvalidAlgorithm
                    | ErrorKind::InvalidKeyFormat => IdentityError::BadSignature,
                    ErrorKind::InvalidIssuer | ErrorKind::InvalidAudience => {
                        IdentityError::WrongAudience
                    }
                    _ => IdentityError::Malformed,
                }
            })?;
        let claims = data.claims;
        if claims.exp - claims.iat > self.max_lifetime.num_seconds() {
            return Err(IdentityError::TooLong);
        }
        if claims.identity.school_id != claims.scope.school_id
            || claims.sub != claims.identity.user_id.to_string()
        {
            return Err(IdentityError::Inconsistent);
        }
        Ok(VerifiedTurnIdentity { claims })
    }
}

/// A turn identity whose signature and expiry were checked. Only [`TurnVerifier::verify`] makes one.
#[derive(Debug, Clone)]
pub struct VerifiedTurnIdentity {
    claims: Claims,
}

impl VerifiedTurnIdentity {
    /// Who the call acts as.
    pub fn identity(&self) -> &Identity {
        &self.claims.identity
    }

    /// How far the call reaches.
    pub fn scope(&self) -> &CallScope {
        &self.claims.scope
    }

    /// The turn the identity was minted for.
    pub fn turn_id(&self) -> TurnId {
        self.claims.turn
    }

    /// The thread of that turn.
    pub fn thread_id(&self) -> ThreadId {
        self.claims.thread
    }

    /// Whether the identity carries the staff member's approval of exactly this call and input.
    pub fn approves(&self, call_id: &crate::ids::ToolCallId, input: &serde_json::Value) -> bool {
        self.claims
            .approved
            .as_ref()
            .is_some_and(|approved| &approved.call_id == call_id && &approved.input == input)
    }

    /// When it stops being valid.
    pub fn expires_at(&self) -> DateTime<Utc> {
        DateTime::from_timestamp(self.claims.exp, 0).unwrap_or(DateTime::<Utc>::MIN_UTC)
    }
}

/// A [`TurnVerifier`] that remembers what it verified, keyed by the token's **exact bytes**, until
/// the identity expires — so the many tool calls of one turn pay for one Ed25519 verification.
///
/// A token that differs in any byte (a tampered one) is never served from the cache and is verified
/// afresh; an entry is never served at or after its `exp`; at most `capacity` entries are kept
/// (when full, expired entries are dropped, and if none had expired, everything is). Cheap to
/// share.
///
/// An entry is found by a keyed hash of the token's last [`KEY_TAIL`] bytes — the end of its
/// signature, which differs between any two signed tokens — and served only if its whole token is
/// the same, byte for byte. Hashing the whole token (several hundred bytes) cost the tool server
/// about 2% of a read's instructions (decision 0021).
pub struct CachingVerifier {
    verifier: TurnVerifier,
    capacity: usize,
    keys: std::hash::RandomState,
    cache: std::sync::Mutex<std::collections::HashMap<u64, (String, VerifiedTurnIdentity)>>,
}

/// How many of a token's last bytes [`CachingVerifier`] hashes to find its entry.
const KEY_TAIL: usize = 32;

impl std::fmt::Debug for CachingVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachingVerifier")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl CachingVerifier {
    /// Caches up to `capacity` verified identities from `verifier`.
    pub fn new(verifier: TurnVerifier, capacity: usize) -> Self {
        Self {
            verifier,
            capacity: capacity.max(1),
            keys: std::hash::RandomState::new(),
            cache: std::sync::Mutex::default(),
        }
    }

    /// [`TurnVerifier::verify`], answered from the cache when these exact bytes were verified
    /// before and have not expired.
    pub fn verify(
        &self,
        token: &SignedTurnIdentity,
    ) -> Result<VerifiedTurnIdentity, IdentityError> {
        self.verify_at(token, Utc::now())
    }

    /// [`CachingVerifier::verify`] as of `now` (the cache's clock; the signature check itself
    /// uses the system clock).
    pub fn verify_at(
        &self,
        token: &SignedTurnIdentity,
        now: DateTime<Utc>,
    ) -> Result<VerifiedTurnIdentity, IdentityError> {
        let token_text = token.as_str();
        let key = std::hash::BuildHasher::hash_one(
            &self.keys,
            &token_text.as_bytes()[token_text.len().saturating_sub(KEY_TAIL)..],
        );
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((cached, verified)) = cache.get(&key)
            && cached == token_text
        {
            if now < verified.expires_at() {
                return Ok(verified.clone());
            }
            cache.remove(&key);
            return Err(IdentityError::Expired);
        }
        drop(cache);
        let verified = self.verifier.verify(token)?;
        if now >= verified.expires_at() {
            return Err(IdentityError::Expired);
        }
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= self.capacity {
            cache.retain(|_, (_, cached)| now < cached.expires_at());
            if cache.len() >= self.capacity {
                cache.clear();
            }
        }
        cache.insert(key, (token_text.to_owned(), verified.clone()));
        Ok(verified)
    }

    /// How many identities are cached.
    pub fn cached(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}

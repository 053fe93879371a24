//! Bearer-token authentication, unit-level: an `Authenticator` built from `AuthSettings` is handed
//! header maps directly. HS256 claims and signatures, the pinned algorithm, EdDSA with a PEM key,
//! a JWKS served by a counting test server (no fetch storms), and development tokens.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::Utc;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rover_contracts::ErrorCode;
use rover_contracts::ids::UserId;
use rover_gateway::AuthSettings;
use rover_gateway::{Authenticator, DEVELOPMENT_HS256_SECRET, dev_token};
use rover_settings::Secret;
use rover_testkit::TurnKeys;
use serde_json::{Value, json};

const SECRET: &str = "a-test-secret-of-more-than-16-bytes";
const ISSUER: &str = "rover-test";
const AUDIENCE: &str = "rover";

// ---- helpers -------------------------------------------------------------------------------

fn hs256_settings() -> AuthSettings {
    AuthSettings {
        algorithm: "HS256".to_owned(),
        hs256_secret: Some(Secret::new(SECRET.to_owned())),
        public_key_file: None,
        jwks_url: None,
        issuer: ISSUER.to_owned(),
        audience: AUDIENCE.to_owned(),
        leeway_secs: 30,
        dev_token_ttl_secs: 3600,
        ..AuthSettings::default()
    }
}

fn eddsa_settings(keys: &TurnKeys) -> AuthSettings {
    AuthSettings {
        algorithm: "EdDSA".to_owned(),
        hs256_secret: None,
        public_key_file: Some(keys.public_key_file()),
        ..hs256_settings()
    }
}

fn jwks_settings(url: &str) -> AuthSettings {
    AuthSettings {
        algorithm: "EdDSA".to_owned(),
        hs256_secret: None,
        jwks_url: Some(url.to_owned()),
        ..hs256_settings()
    }
}

fn now() -> i64 {
    Utc::now().timestamp()
}

/// Claims that pass every check, valid for ten minutes.
fn claims(user: UserId) -> Value {
    let now = now();
    json!({ "sub": user.to_string(), "iss": ISSUER, "aud": AUDIENCE, "iat": now, "nbf": now, "exp": now + 600 })
}

/// `claims` with one field replaced (or removed, with `Value::Null`).
fn claims_with(user: UserId, field: &str, value: Value) -> Value {
    let mut claims = claims(user);
    if value.is_null() {
        claims.as_object_mut().unwrap().remove(field);
    } else {
        claims[field] = value;
    }
    claims
}

fn hs256(claims: &Value, secret: &[u8]) -> String {
    sign(
        Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret).unwrap(),
    )
}

fn sign(header: Header, claims: &Value, key: &EncodingKey) -> String {
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn eddsa_key(keys: &TurnKeys) -> EncodingKey {
    EncodingKey::from_ed_pem(&std::fs::read(keys.private_key_file()).unwrap()).unwrap()
}

fn eddsa(claims: &Value, keys: &TurnKeys, kid: Option<&str>) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = kid.map(str::to_owned);
    sign(header, claims, &eddsa_key(keys))
}

fn b64(json: &Value) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(json).unwrap())
}

fn authorization(value: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, value.parse().unwrap());
    headers
}

fn bearer(token: &str) -> HeaderMap {
    authorization(&format!("Bearer {token}"))
}

/// Authenticates `headers`, expecting success.
async fn accepted(auth: &Authenticator, headers: &HeaderMap) -> UserId {
    match auth.authenticate(headers).await {
        Ok(principal) => principal.user_id,
        Err(error) => panic!("expected the token to be accepted, got {error}"),
    }
}

/// Authenticates `headers`, expecting a 401, and returns its reason. The reason never echoes any
/// part of the credentials.
async fn rejected(auth: &Authenticator, headers: &HeaderMap) -> String {
    let error = auth
        .authenticate(headers)
        .await
        .expect_err("expected a rejection");
    assert_eq!(error.code, ErrorCode::Unauthenticated);
    if let Some(value) = headers.get(AUTHORIZATION) {
        let value = value.to_str().unwrap_or_default();
        for part in value.split(['.', ' ']).filter(|part| part.len() > 8) {
            assert!(
                !error.message.contains(part),
                "the reason echoes the credentials: {}",
                error.message
            );
        }
    }
    error.message
}

// ---- HS256: claims and signatures ------------------------------------------------------------

#[tokio::test]
async fn a_valid_hs256_token_yields_its_subject() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    let user = UserId::new();
    let token = hs256(&claims(user), SECRET.as_bytes());
    assert_eq!(accepted(&auth, &bearer(&token)).await, user);
    // The scheme is case-insensitive.
    assert_eq!(
        accepted(&auth, &authorization(&format!("bearer {token}"))).await,
        user
    );
}

#[tokio::test]
async fn an_expired_token_is_refused_beyond_the_leeway() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    let user = UserId::new();
    let expired = hs256(
        &claims_with(user, "exp", json!(now() - 120)),
        SECRET.as_bytes(),
    );
    assert_eq!(rejected(&auth, &bearer(&expired)).await, "token expired");
    let within_leeway = hs256(
        &claims_with(user, "exp", json!(now() - 5)),
        SECRET.as_bytes(),
    );
    assert_eq!(accepted(&auth, &bearer(&within_leeway)).await, user);
}

#[tokio::test]
async fn a_token_not_yet_valid_is_refused_beyond_the_leeway() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    let user = UserId::new();
    let future = hs256(
        &claims_with(user, "nbf", json!(now() + 300)),
        SECRET.as_bytes(),
    );
    assert_eq!(
        rejected(&auth, &bearer(&future)).await,
        "token not yet valid"
    );
    let within_leeway = hs256(
        &claims_with(user, "nbf", json!(now() + 5)),
        SECRET.as_bytes(),
    );
    assert_eq!(accepted(&auth, &bearer(&within_leeway)).await, user);
}

#[tokio::test]
async fn the_audience_and_issuer_must_match() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    let user = UserId::new();
    let wrong_aud = hs256(
        &claims_with(user, "aud", json!("someone-else")),
        SECRET.as_bytes(),
    );
    assert_eq!(rejected(&auth, &bearer(&wrong_aud)).await, "wrong audience");
    let wrong_iss = hs256(
        &claims_with(user, "iss", json!("evil-idp")),
        SECRET.as_bytes(),
    );
    assert_eq!(rejected(&auth, &bearer(&wrong_iss)).await, "wrong issuer");
}

#[tokio::test]
async fn exp_iss_aud_and_sub_are_required() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    let user = UserId::new();
    for (claim, reason) in [
        ("exp", "missing exp claim"),
        ("iss", "missing iss claim"),
        ("aud", "missing aud claim"),
        ("sub", "missing sub claim"),
    ] {
        let token = hs256(&claims_with(user, claim, Value::Null), SECRET.as_bytes());
        assert_eq!(
            rejected(&auth, &bearer(&token)).await,
            reason,
            "without {claim}"
        );
    }
}

#[tokio::test]
async fn the_subject_must_be_a_user_id() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    let token = hs256(
        &claims_with(UserId::new(), "sub", json!("admin")),
        SECRET.as_bytes(),
    );
    assert_eq!(rejected(&auth, &bearer(&token)).await, "invalid subject");
}

#[tokio::test]
async fn a_token_signed_with_another_key_is_refused() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    let token = hs256(&claims(UserId::new()), b"another-secret-of-enough-length");
    assert_eq!(rejected(&auth, &bearer(&token)).await, "invalid signature");
}

#[tokio::test]
async fn a_tampered_payload_is_refused() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    let token = hs256(&claims(UserId::new()), SECRET.as_bytes());
    let [header, _, signature]: [&str; 3] =
        token.split('.').collect::<Vec<_>>().try_into().unwrap();
    let forged = format!("{header}.{}.{signature}", b64(&claims(UserId::new())));
    assert_eq!(rejected(&auth, &bearer(&forged)).await, "invalid signature");
}

#[tokio::test]
async fn alg_none_and_other_algorithms_are_not_allowed() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    let payload = b64(&claims(UserId::new()));
    let unsigned = format!(
        "{}.{payload}.",
        b64(&json!({ "alg": "none", "typ": "JWT" }))
    );
    assert_eq!(
        rejected(&auth, &bearer(&unsigned)).await,
        "algorithm not allowed"
    );
    let hs384 = sign(
        Header::new(Algorithm::HS384),
        &claims(UserId::new()),
        &EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    );
    assert_eq!(
        rejected(&auth, &bearer(&hs384)).await,
        "algorithm not allowed"
    );
}

#[tokio::test]
async fn missing_or_garbled_credentials_are_refused() {
    let auth = Authenticator::new(&hs256_settings()).unwrap();
    assert_eq!(
        rejected(&auth, &HeaderMap::new()).await,
        "missing bearer token"
    );
    assert_eq!(
        rejected(&auth, &authorization("Basic YWRtaW46aHVudGVyMg==")).await,
        "missing bearer token"
    );
    assert_eq!(
        rejected(&auth, &authorization("Bearer")).await,
        "missing bearer token"
    );
    assert_eq!(
        rejected(&auth, &authorization("Bearer    ")).await,
        "missing bearer token"
    );
    assert_eq!(
        rejected(&auth, &bearer("not-a-jwt")).await,
        "malformed token"
    );
    assert_eq!(rejected(&auth, &bearer("a.b.c")).await, "malformed token");
    assert_eq!(
        rejected(&auth, &bearer("a.b.c.d.e")).await,
        "malformed token"
    );
    let huge = format!("{}.e30.", "A".repeat(10_000));
    assert_eq!(rejected(&auth, &bearer(&huge)).await, "malformed token");

    let mut twice = bearer(&hs256(&claims(UserId::new()), SECRET.as_bytes()));
    twice.append(AUTHORIZATION, "Bearer other".parse().unwrap());
    assert_eq!(rejected(&auth, &twice).await, "malformed token");
}

#[test]
fn misconfiguration_fails_at_start_up() {
    let error =
        |settings: AuthSettings| format!("{:#}", Authenticator::new(&settings).unwrap_err());

    let no_secret = AuthSettings {
        hs256_secret: None,
        ..hs256_settings()
    };
    assert!(error(no_secret).contains("auth.hs256_secret"));
    let short = AuthSettings {
        hs256_secret: Some(Secret::new("fifteen-bytes!!".to_owned())),
        ..hs256_settings()
    };
    assert!(error(short).contains("at least 16 bytes"));
    for algorithm in ["none", "HS512", "rs256", ""] {
        let settings = AuthSettings {
            algorithm: algorithm.to_owned(),
            ..hs256_settings()
        };
        assert!(
            error(settings).contains("must be one of HS256, RS256, ES256, EdDSA"),
            "{algorithm}"
        );
    }
    let no_key = AuthSettings {
        algorithm: "EdDSA".to_owned(),
        ..hs256_settings()
    };
    assert!(error(no_key).contains("needs auth.public_key_file or auth.jwks_url"));
    let both_sources = AuthSettings {
        public_key_file: Some("/nonexistent/key.pem".into()),
        ..jwks_settings("https://idp.test/")
    };
    assert!(error(both_sources).contains("set only one of"));
    let plain_http = jwks_settings("http://idp.example.com/jwks.json");
    assert!(error(plain_http).contains("must use https"));
    let empty_audience = AuthSettings {
        audience: String::new(),
        ..hs256_settings()
    };
    assert!(error(empty_audience).contains("auth.audience must not be empty"));
}

#[tokio::test]
async fn the_built_in_secret_is_used_only_in_development_mode() {
    let error =
        |settings: AuthSettings| format!("{:#}", Authenticator::new(&settings).unwrap_err());
    // Out of the box (no secret, no development mode) the gateway does not start.
    let defaults = error(AuthSettings::default());
    assert!(
        defaults.contains("auth.hs256_secret") && defaults.contains("auth.development = true"),
        "{defaults}"
    );
    // The public secret is refused outside development mode even when configured explicitly.
    let known = AuthSettings {
        hs256_secret: Some(Secret::new(DEVELOPMENT_HS256_SECRET.to_owned())),
        ..hs256_settings()
    };
    assert!(
        error(known).contains("built-in development secret"),
        "the known secret is refused"
    );
    // Development mode uses it, and accepts tokens signed with it; a gateway with a secret of its
    // own refuses them.
    let development = AuthSettings::development();
    let auth = Authenticator::new(&development).unwrap();
    let user = UserId::new();
    let token = dev_token(&development, user, "a@b.c", Utc::now()).unwrap();
    assert_eq!(accepted(&auth, &bearer(&token)).await, user);
    let production = Authenticator::new(&AuthSettings {
        issuer: development.issuer.clone(),
        audience: development.audience.clone(),
        ..hs256_settings()
    })
    .unwrap();
    assert_eq!(
        rejected(&production, &bearer(&token)).await,
        "invalid signature"
    );
}

// ---- EdDSA with a PEM public key ------------------------------------------------------------

#[tokio::test]
async fn a_valid_eddsa_token_passes_with_the_pem_public_key() {
    let keys = TurnKeys::generate();
    let auth = Authenticator::new(&eddsa_settings(&keys)).unwrap();
    let user = UserId::new();
    assert_eq!(
        accepted(&auth, &bearer(&eddsa(&claims(user), &keys, None))).await,
        user
    );

    let stranger = TurnKeys::generate();
    let foreign = eddsa(&claims(user), &stranger, None);
    assert_eq!(
        rejected(&auth, &bearer(&foreign)).await,
        "invalid signature"
    );
}

#[tokio::test]
async fn hs256_signed_with_the_public_key_is_not_allowed_when_eddsa_is_pinned() {
    let keys = TurnKeys::generate();
    let auth = Authenticator::new(&eddsa_settings(&keys)).unwrap();
    let public_pem = std::fs::read(keys.public_key_file()).unwrap();
    let confused = hs256(&claims(UserId::new()), &public_pem);
    assert_eq!(
        rejected(&auth, &bearer(&confused)).await,
        "algorithm not allowed"
    );
}

#[test]
fn an_unreadable_public_key_fails_at_start_up() {
    let keys = TurnKeys::generate();
    let missing = AuthSettings {
        public_key_file: Some(keys.dir().join("absent.pem")),
        ..eddsa_settings(&keys)
    };
    assert!(format!("{:#}", Authenticator::new(&missing).unwrap_err()).contains("Failed to read"));
    // The private key is not an SPKI public key.
    let private = AuthSettings {
        public_key_file: Some(keys.private_key_file()),
        ..eddsa_settings(&keys)
    };
    assert!(
        format!("{:#}", Authenticator::new(&private).unwrap_err())
            .contains("is not a PEM EdDSA public key")
    );
}

// ---- EdDSA with a JWKS ----------------------------------------------------------------------

/// A JWKS endpoint on 127.0.0.1:0 that counts the fetches and serves whatever set it holds now.
struct JwksServer {
    url: String,
    fetches: Arc<AtomicUsize>,
    set: Arc<Mutex<Value>>,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    async fn start(keys: Vec<Value>) -> Self {
        let fetches = Arc::new(AtomicUsize::new(0));
        let set = Arc::new(Mutex::new(json!({ "keys": keys })));
        let app = axum::Router::new().route(
            "/.well-known/jwks.json",
            axum::routing::get({
                let (fetches, set) = (fetches.clone(), set.clone());
                move || {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    let body = set.lock().unwrap().clone();
                    async move { axum::Json(body) }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/.well-known/jwks.json",
            listener.local_addr().unwrap()
        );
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url,
            fetches,
            set,
            task,
        }
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    fn publish(&self, keys: Vec<Value>) {
        *self.set.lock().unwrap() = json!({ "keys": keys });
    }

    fn authenticator(&self) -> Authenticator {
        Authenticator::new(&jwks_settings(&self.url)).unwrap()
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The public JWK of `keys`, as an identity provider would publish it: the raw Ed25519 key is the
/// last 32 bytes of the SPKI public key file.
fn jwk(keys: &TurnKeys, kid: &str) -> Value {
    let pem = std::fs::read_to_string(keys.public_key_file()).unwrap();
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    let spki = STANDARD.decode(body).unwrap();
    let raw = &spki[spki.len() - 32..];
    json!({ "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": kid, "x": URL_SAFE_NO_PAD.encode(raw) })
}

#[tokio::test]
async fn a_token_with_a_known_kid_passes_and_the_set_is_fetched_once() {
    let keys = TurnKeys::generate();
    let server = JwksServer::start(vec![jwk(&keys, "k1")]).await;
    let auth = server.authenticator();
    assert_eq!(
        server.fetches(),
        0,
        "nothing is fetched before the first token"
    );
    for _ in 0..3 {
        let user = UserId::new();
        assert_eq!(
            accepted(&auth, &bearer(&eddsa(&claims(user), &keys, Some("k1")))).await,
            user
        );
    }
    assert_eq!(server.fetches(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unknown_kids_cause_at_most_one_extra_fetch() {
    let keys = TurnKeys::generate();
    let server = JwksServer::start(vec![jwk(&keys, "k1")]).await;
    let auth = Arc::new(server.authenticator());
    let user = UserId::new();
    accepted(&auth, &bearer(&eddsa(&claims(user), &keys, Some("k1")))).await;
    assert_eq!(server.fetches(), 1);

    for n in 0..20 {
        let token = eddsa(&claims(user), &keys, Some(&format!("unknown-{n}")));
        assert_eq!(rejected(&auth, &bearer(&token)).await, "unknown key");
    }
    assert_eq!(server.fetches(), 2, "one refetch, then the cooldown");

    let mut concurrent = tokio::task::JoinSet::new();
    for n in 0..20 {
        let (auth, token) = (
            auth.clone(),
            eddsa(&claims(user), &keys, Some(&format!("concurrent-{n}"))),
        );
        concurrent.spawn(async move { rejected(&auth, &bearer(&token)).await });
    }
    for reason in concurrent.join_all().await {
        assert_eq!(reason, "unknown key");
    }
    assert_eq!(server.fetches(), 2, "still within the cooldown");
    accepted(&auth, &bearer(&eddsa(&claims(user), &keys, Some("k1")))).await;
    assert_eq!(server.fetches(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_unknown_kids_on_first_use_cause_one_extra_fetch() {
    let keys = TurnKeys::generate();
    let server = JwksServer::start(vec![jwk(&keys, "k1")]).await;
    let auth = Arc::new(server.authenticator());
    let mut concurrent = tokio::task::JoinSet::new();
    for n in 0..20 {
        let (auth, token) = (
            auth.clone(),
            eddsa(&claims(UserId::new()), &keys, Some(&format!("kid-{n}"))),
        );
        concurrent.spawn(async move { rejected(&auth, &bearer(&token)).await });
    }
    for reason in concurrent.join_all().await {
        assert_eq!(reason, "unknown key");
    }
    assert_eq!(server.fetches(), 2, "the first-use fetch and one refetch");
}

#[tokio::test]
async fn a_rotated_key_is_found_by_one_refetch() {
    let (old, new) = (TurnKeys::generate(), TurnKeys::generate());
    let server = JwksServer::start(vec![jwk(&old, "2024")]).await;
    let auth = server.authenticator();
    let user = UserId::new();
    accepted(&auth, &bearer(&eddsa(&claims(user), &old, Some("2024")))).await;
    server.publish(vec![jwk(&old, "2024"), jwk(&new, "2025")]);
    assert_eq!(
        accepted(&auth, &bearer(&eddsa(&claims(user), &new, Some("2025")))).await,
        user
    );
    assert_eq!(server.fetches(), 2);

    // The cooldown now holds: a third key published at once is not seen yet.
    let newest = TurnKeys::generate();
    server.publish(vec![jwk(&new, "2025"), jwk(&newest, "2026")]);
    let early = eddsa(&claims(user), &newest, Some("2026"));
    assert_eq!(rejected(&auth, &bearer(&early)).await, "unknown key");
    assert_eq!(server.fetches(), 2);
}

#[tokio::test]
async fn hostile_or_missing_kids_are_refused_without_fetching() {
    let keys = TurnKeys::generate();
    let server = JwksServer::start(vec![jwk(&keys, "k1")]).await;
    let auth = server.authenticator();
    let user = UserId::new();
    let long = "k".repeat(129);
    for kid in [
        "../../etc/passwd",
        "' OR 1=1 --",
        "k1/../k1",
        "k1\n",
        "",
        long.as_str(),
    ] {
        let token = eddsa(&claims(user), &keys, Some(kid));
        assert_eq!(
            rejected(&auth, &bearer(&token)).await,
            "malformed token",
            "kid {kid:?}"
        );
    }
    let no_kid = eddsa(&claims(user), &keys, None);
    assert_eq!(rejected(&auth, &bearer(&no_kid)).await, "unknown key");
    assert_eq!(server.fetches(), 0);
}

#[tokio::test]
async fn only_keys_that_fit_the_pinned_algorithm_are_used() {
    let (keys, encryption) = (TurnKeys::generate(), TurnKeys::generate());
    let shared_secret = b"a-symmetric-key-in-the-key-set!!";
    let mut encryption_key = jwk(&encryption, "enc");
    encryption_key["use"] = json!("enc");
    let mut mislabelled = jwk(&keys, "labelled-rs256");
    mislabelled["alg"] = json!("RS256");
    let server = JwksServer::start(vec![
        jwk(&keys, "k1"),
        json!({ "kty": "oct", "kid": "shared", "alg": "HS256", "k": URL_SAFE_NO_PAD.encode(shared_secret) }),
        encryption_key,
        mislabelled,
        json!({ "kty": "unheard-of", "kid": "odd" }),
    ])
    .await;
    let auth = server.authenticator();
    let user = UserId::new();

    // The odd key does not spoil the set.
    assert_eq!(
        accepted(&auth, &bearer(&eddsa(&claims(user), &keys, Some("k1")))).await,
        user
    );

    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("shared".to_owned());
    let symmetric = sign(
        header,
        &claims(user),
        &EncodingKey::from_secret(shared_secret).unwrap(),
    );
    assert_eq!(
        rejected(&auth, &bearer(&symmetric)).await,
        "algorithm not allowed"
    );

    for (kid, signer) in [
        ("shared", &keys),
        ("enc", &encryption),
        ("labelled-rs256", &keys),
    ] {
        let token = eddsa(&claims(user), signer, Some(kid));
        assert_eq!(
            rejected(&auth, &bearer(&token)).await,
            "unknown key",
            "kid {kid}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_key_set_refuses_tokens() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    drop(listener);
    let keys = TurnKeys::generate();
    let auth = Authenticator::new(&jwks_settings(&url)).unwrap();
    let token = eddsa(&claims(UserId::new()), &keys, Some("k1"));
    assert_eq!(rejected(&auth, &bearer(&token)).await, "unknown key");
    assert_eq!(rejected(&auth, &bearer(&token)).await, "unknown key");
}

// ---- development tokens ---------------------------------------------------------------------

#[tokio::test]
async fn a_development_token_round_trips() {
    let settings = hs256_settings();
    let auth = Authenticator::new(&settings).unwrap();
    let user = UserId::new();
    let issued_at = Utc::now();
    let token = dev_token(&settings, user, "teacher@hill.school", issued_at).unwrap();
    assert_eq!(accepted(&auth, &bearer(&token)).await, user);

    let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(&token).unwrap();
    assert_eq!(claims["email"], "teacher@hill.school");
    assert_eq!(claims["iss"], ISSUER);
    assert_eq!(claims["aud"], AUDIENCE);
    assert_eq!(claims["iat"], issued_at.timestamp());
    assert_eq!(claims["nbf"], issued_at.timestamp());
    assert_eq!(claims["exp"], issued_at.timestamp() + 3600);

    let long_ago = dev_token(
        &settings,
        user,
        "teacher@hill.school",
        issued_at - chrono::Duration::hours(2),
    )
    .unwrap();
    assert_eq!(rejected(&auth, &bearer(&long_ago)).await, "token expired");
}

#[test]
fn development_tokens_are_hs256_only() {
    let keys = TurnKeys::generate();
    let error = dev_token(&eddsa_settings(&keys), UserId::new(), "a@b.c", Utc::now()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "rover-gateway token only mints HS256 development tokens; configure auth.algorithm = HS256"
    );
    let no_secret = AuthSettings {
        hs256_secret: None,
        ..hs256_settings()
    };
    assert!(dev_token(&no_secret, UserId::new(), "a@b.c", Utc::now()).is_err());
}

//! The signed turn identity: only the holder of the gateway's private key can mint one the tool
//! server accepts; tampering, expiry, another key and inconsistent claims are all refused.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{Duration, Utc};
use rover_contracts::identity::*;
use rover_contracts::ids::{SchoolId, ThreadId, TurnId};

use crate::fixtures::{key_pair, signer_and_verifier, teacher_context};

fn grant() -> TurnGrant {
    let context = teacher_context();
    TurnGrant {
        turn_id: TurnId::new(),
        thread_id: ThreadId::new(),
        identity: context.identity(),
        scope: context.call_scope(),
    }
}

#[test]
fn a_minted_identity_verifies_and_carries_the_grant() {
    let (signer, verifier) = signer_and_verifier();
    let grant = grant();
    let token = signer
        .mint(grant.clone(), Utc::now(), Duration::minutes(15))
        .unwrap();
    let verified = verifier.verify(&token).unwrap();
    assert_eq!(verified.identity(), &grant.identity);
    assert_eq!(verified.scope(), &grant.scope);
    assert_eq!(verified.turn_id(), grant.turn_id);
    assert_eq!(verified.thread_id(), grant.thread_id);
    assert!(verified.expires_at() > Utc::now());
}

#[test]
fn an_expired_identity_is_rejected() {
    let (signer, verifier) = signer_and_verifier();
    let token = signer
        .mint(
            grant(),
            Utc::now() - Duration::minutes(30),
            Duration::minutes(15),
        )
        .unwrap();
    assert_eq!(verifier.verify(&token).unwrap_err(), IdentityError::Expired);
}

#[test]
fn an_identity_signed_by_another_key_is_rejected() {
    let (signer, _) = signer_and_verifier();
    let (_, verifier) = signer_and_verifier();
    let token = signer
        .mint(grant(), Utc::now(), Duration::minutes(15))
        .unwrap();
    assert_eq!(
        verifier.verify(&token).unwrap_err(),
        IdentityError::BadSignature
    );
}

#[test]
fn a_tampered_payload_is_rejected() {
    let (signer, verifier) = signer_and_verifier();
    let token = signer
        .mint(grant(), Utc::now(), Duration::minutes(15))
        .unwrap();
    let parts: Vec<&str> = token.as_str().split('.').collect();
    let mut claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    let other_school = SchoolId::new();
    claims["identity"]["schoolId"] = serde_json::json!(other_school);
    claims["scope"]["schoolId"] = serde_json::json!(other_school);
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap()),
        parts[2]
    );
    assert_eq!(
        verifier
            .verify(&SignedTurnIdentity::from_token(forged))
            .unwrap_err(),
        IdentityError::BadSignature
    );
}

#[test]
fn an_unsigned_identity_is_rejected() {
    let (signer, verifier) = signer_and_verifier();
    let token = signer
        .mint(grant(), Utc::now(), Duration::minutes(15))
        .unwrap();
    let parts: Vec<&str> = token.as_str().split('.').collect();
    let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    for forged in [
        format!("{none_header}.{}.", parts[1]),
        format!("{}.{}.", parts[0], parts[1]),
        String::new(),
        "garbage".into(),
    ] {
        assert!(
            verifier
                .verify(&SignedTurnIdentity::from_token(forged.clone()))
                .is_err(),
            "accepted {forged:?}"
        );
    }
}

#[test]
fn an_hs256_token_keyed_with_the_public_key_is_rejected() {
    // The classic algorithm-confusion attack: sign with HMAC using the verifier's public key.
    let (private, public) = key_pair();
    let verifier = TurnVerifier::from_public_key_bytes(&public, Duration::hours(1));
    let genuine = TurnSigner::from_pkcs8_der(&private)
        .mint(grant(), Utc::now(), Duration::minutes(15))
        .unwrap();
    let claims: serde_json::Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(genuine.as_str().split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(&public).unwrap(),
    )
    .unwrap();
    assert_eq!(
        verifier
            .verify(&SignedTurnIdentity::from_token(hs))
            .unwrap_err(),
        IdentityError::BadSignature
    );
}

#[test]
fn an_identity_valid_for_longer_than_allowed_is_rejected() {
    let (private, public) = key_pair();
    let verifier = TurnVerifier::from_public_key_bytes(&public, Duration::minutes(30));
    let token = TurnSigner::from_pkcs8_der(&private)
        .mint(grant(), Utc::now(), Duration::days(365))
        .unwrap();
    assert_eq!(verifier.verify(&token).unwrap_err(), IdentityError::TooLong);
}

#[test]
fn identity_and_scope_naming_different_schools_are_rejected() {
    let (signer, verifier) = signer_and_verifier();
    let mut grant = grant();
    grant.scope.school_id = SchoolId::new();
    let token = signer
        .mint(grant, Utc::now(), Duration::minutes(15))
        .unwrap();
    assert_eq!(
        verifier.verify(&token).unwrap_err(),
        IdentityError::Inconsistent
    );
}

#[test]
fn keys_load_from_pem() {
    let (private, public) = key_pair();
    let private_pem = pem_block("PRIVATE KEY", &private);
    // SPKI for Ed25519: a fixed 12-byte prefix before the raw key.
    let mut spki = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    spki.extend_from_slice(&public);
    let public_pem = pem_block("PUBLIC KEY", &spki);
    let signer = TurnSigner::from_pem(private_pem.as_bytes()).unwrap();
    let verifier = TurnVerifier::from_pem(public_pem.as_bytes(), Duration::hours(1)).unwrap();
    let token = signer
        .mint(grant(), Utc::now(), Duration::minutes(5))
        .unwrap();
    assert!(verifier.verify(&token).is_ok());
    assert!(TurnSigner::from_pem(b"not a key").is_err());
    assert!(TurnVerifier::from_pem(b"not a key", Duration::hours(1)).is_err());
}

fn pem_block(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    format!("-----BEGIN {label}-----\n{b64}\n-----END {label}-----\n")
}

#[test]
fn the_token_never_prints() {
    let (signer, _) = signer_and_verifier();
    let token = signer
        .mint(grant(), Utc::now(), Duration::minutes(5))
        .unwrap();
    assert_eq!(format!("{token:?}"), "SignedTurnIdentity(…)");
}

#[test]
fn a_cached_identity_is_served_until_it_expires_and_refused_after() {
    let (signer, verifier) = signer_and_verifier();
    let cache = CachingVerifier::new(verifier, 16);
    let grant = grant();
    let token = signer
        .mint(grant.clone(), Utc::now(), Duration::minutes(15))
        .unwrap();
    let first = cache.verify(&token).unwrap();
    assert_eq!(cache.cached(), 1);
    let again = cache.verify(&token).unwrap();
    assert_eq!(again.identity(), &grant.identity);
    assert_eq!(cache.cached(), 1, "served from the cache");
    // At its expiry the cached entry is refused, though the signature check alone (with its
    // leeway) would still pass.
    assert_eq!(
        cache.verify_at(&token, first.expires_at()).unwrap_err(),
        IdentityError::Expired
    );
    assert_eq!(cache.cached(), 0);
}

/// A cache that has verified (and so holds) one fresh token, and that token.
fn a_cache_holding_one_token() -> (CachingVerifier, SignedTurnIdentity) {
    let (signer, verifier) = signer_and_verifier();
    let cache = CachingVerifier::new(verifier, 16);
    let token = signer
        .mint(grant(), Utc::now(), Duration::minutes(15))
        .unwrap();
    cache.verify(&token).unwrap();
    (cache, token)
}

#[test]
fn a_tampered_identity_is_never_served_from_the_cache() {
    let (cache, token) = a_cache_holding_one_token();
    // Same header and claims, one signature byte changed.
    let (signed, signature) = token.as_str().rsplit_once('.').unwrap();
    let mut signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
    signature[0] ^= 1;
    let tampered =
        SignedTurnIdentity::from_token(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)));
    assert_eq!(
        cache.verify(&tampered).unwrap_err(),
        IdentityError::BadSignature
    );
    assert_eq!(cache.cached(), 1, "the tampered token was not cached");
}

#[test]
fn a_token_that_shares_a_cached_tokens_end_is_never_served_from_the_cache() {
    let (cache, token) = a_cache_holding_one_token();
    // The cache finds an entry by the token's last bytes: change one byte of the claims and
    // keep the whole signature, so the two tokens end alike.
    let (header, rest) = token.as_str().split_once('.').unwrap();
    let (claims, signature) = rest.split_once('.').unwrap();
    let mut claims = URL_SAFE_NO_PAD.decode(claims).unwrap();
    let at = claims.len() / 2;
    claims[at] ^= 1;
    let tampered = SignedTurnIdentity::from_token(format!(
        "{header}.{}.{signature}",
        URL_SAFE_NO_PAD.encode(claims)
    ));
    assert!(tampered.as_str().ends_with(signature));
    assert!(
        cache.verify(&tampered).is_err(),
        "a changed claim is refused"
    );
    assert_eq!(cache.cached(), 1, "the tampered token was not cached");
    // The genuine token is still served, from the cache.
    cache.verify(&token).unwrap();
    assert_eq!(cache.cached(), 1);
}

#[test]
fn the_cache_stays_within_its_capacity() {
    let (signer, verifier) = signer_and_verifier();
    let cache = CachingVerifier::new(verifier, 3);
    for _ in 0..10 {
        let token = signer
            .mint(grant(), Utc::now(), Duration::minutes(15))
            .unwrap();
        cache.verify(&token).unwrap();
        assert!(cache.cached() <= 3);
    }
}

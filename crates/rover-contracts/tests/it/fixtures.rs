//! Shared fixtures: a runtime context for a campus-tied teacher, and fresh Ed25519 key pairs.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use chrono::NaiveDate;
use rover_contracts::context::*;
use rover_contracts::identity::{TurnSigner, TurnVerifier};
use rover_contracts::ids::*;
use rover_contracts::permission::{Action, Permission, PermissionSnapshot, Subject};

pub(crate) fn date(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

pub(crate) fn teacher_context() -> RuntimeContext {
    let naalya = CampusRef {
        id: CampusId::new(),
        name: "Naalya".into(),
    };
    let s1_blue = ClassRef {
        id: ClassId::new(),
        name: "S1 Blue".into(),
    };
    RuntimeContext {
        user_details: UserDetails {
            name: "Amina Nansubuga".into(),
            email: "amina@hill.school".into(),
            user_id: UserId::new(),
            profile_id: ProfileId::new(),
            user_type: UserType::Teacher,
            school: SchoolRef {
                id: SchoolId::new(),
                name: "Kampala Hill School".into(),
            },
            campus: Some(naalya.clone()),
        },
        run_mode: RunMode::Campus { campus: naalya },
        user_permissions: PermissionSnapshot::new(vec![Permission::new(
            Action::Read,
            Subject::Department,
        )]),
        capabilities: Capabilities {
            class_teacher: true,
            subject_teacher: true,
            director_of_studies: false,
        },
        calendar: Calendar {
            time_zone: "Africa/Kampala".into(),
            academic_year_id: AcademicYearId::new(),
            academic_year: "2026".into(),
            terms: vec![Term {
                id: TermId::new(),
                name: "Term 3".into(),
                starts_on: date(2026, 9, 14),
                ends_on: date(2026, 12, 4),
            }],
        },
        teaching_map: Some(TeachingMap {
            teaches: vec![TaughtClass {
                class: s1_blue.clone(),
                subjects: vec![SubjectRef {
                    id: SubjectId::new(),
                    name: "Mathematics".into(),
                }],
            }],
            class_teacher_of: vec![s1_blue],
        }),
        attachments: vec![],
    }
}

/// A fresh key pair: (PKCS#8 private key DER, raw public key bytes).
pub(crate) fn key_pair() -> (Vec<u8>, Vec<u8>) {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    (pkcs8.as_ref().to_vec(), pair.public_key().as_ref().to_vec())
}

pub(crate) fn signer_and_verifier() -> (TurnSigner, TurnVerifier) {
    let (private, public) = key_pair();
    (
        TurnSigner::from_pkcs8_der(&private),
        TurnVerifier::from_public_key_bytes(&public, chrono::Duration::hours(1)),
    )
}

//! What the demo schools hold: campuses, departments, subjects, staff, classes and teaching,
//! the terms of a year, and each role's permissions.

use rover_contracts::permission::{Action, Subject};

use super::{HILL, LAKESIDE};

pub(super) struct SchoolSeed {
    pub(super) name: &'static str,
    pub(super) time_zone: &'static str,
    pub(super) admission_prefix: &'static str,
    pub(super) campuses: &'static [&'static str],
    /// (name, campus; `None` for school-wide)
    pub(super) departments: &'static [(&'static str, Option<&'static str>)],
    /// (name, department)
    pub(super) subjects: &'static [(&'static str, &'static str)],
    pub(super) staff: &'static [StaffSeed],
    pub(super) classes: &'static [ClassSeed],
    /// (teacher email, class, subject), this academic year
    pub(super) teaching: &'static [(&'static str, &'static str, &'static str)],
    /// (student, class): students who joined after the first seed, numbered after the others so
    /// an existing database's admission numbers do not move.
    pub(super) joined_later: &'static [(&'static str, &'static str)],
}

pub(super) struct StaffSeed {
    pub(super) email: &'static str,
    pub(super) name: &'static str,
    pub(super) user_type: &'static str,
    pub(super) campus: Option<&'static str>,
    pub(super) role: &'static str,
    pub(super) title: &'static str,
}

pub(super) struct ClassSeed {
    pub(super) name: &'static str,
    pub(super) campus: &'static str,
    pub(super) class_teacher: Option<&'static str>,
    pub(super) students: &'static [&'static str],
}

pub(super) const SCHOOLS: [SchoolSeed; 2] = [
    SchoolSeed {
        name: HILL,
        time_zone: "Africa/Kampala",
        admission_prefix: "KHS",
        campuses: &["Naalya", "Kololo"],
        departments: &[
            ("Languages", None),
            ("Mathematics", None),
            ("Humanities", None),
            ("Kololo Arts", Some("Kololo")),
        ],
        subjects: &[
            ("English", "Languages"),
            ("Mathematics", "Mathematics"),
            ("Physics", "Mathematics"),
            ("History", "Humanities"),
        ],
        staff: &[
            StaffSeed {
                email: "admin@hill.school",
                name: "Grace Namubiru",
                user_type: "administrator",
                campus: None,
                role: "school_admin",
                title: "Head Teacher",
            },
            StaffSeed {
                email: "kololo.admin@hill.school",
                name: "Peter Ssemakula",
                user_type: "administrator",
                campus: Some("Kololo"),
                role: "campus_admin",
                title: "Kololo Campus Administrator",
            },
            StaffSeed {
                email: "dos@hill.school",
                name: "Ruth Nabirye",
                user_type: "administrator",
                campus: None,
                role: "director_of_studies",
                title: "Director of Studies",
            },
            StaffSeed {
                email: "amina@hill.school",
                name: "Amina Nakimuli",
                user_type: "teacher",
                campus: Some("Naalya"),
                role: "teacher",
                title: "Mathematics Teacher",
            },
            StaffSeed {
                email: "okello@hill.school",
                name: "James Okello",
                user_type: "teacher",
                campus: Some("Kololo"),
                role: "teacher",
                title: "Physics Teacher",
            },
            StaffSeed {
                email: "bursar@hill.school",
                name: "David Kato",
                user_type: "support",
                campus: None,
                role: "bursar",
                title: "Bursar",
            },
        ],
        classes: &[
            ClassSeed {
                name: "S1 Blue",
                campus: "Naalya",
                class_teacher: Some("amina@hill.school"),
                students: &[
                    "Nakato Sarah",
                    "Mugisha Brian",
                    "Achieng Grace",
                    "Ssekandi Joseph",
                    "Namuli Esther",
                ],
            },
            ClassSeed {
                name: "S2 Green",
                campus: "Naalya",
                class_teacher: None,
                students: &["Kizza Ivan", "Nalwoga Faith", "Tumusiime Allan"],
            },
            ClassSeed {
                name: "S1 Gold",
                campus: "Kololo",
                class_teacher: None,
                students: &[
                    "Atim Patricia",
                    "Byaruhanga Moses",
                    "Namatovu Joan",
                    "Opio Daniel",
                ],
            },
            ClassSeed {
                name: "S2 Red",
                campus: "Kololo",
                class_teacher: None,
                students: &["Auma Betty", "Wasswa Henry", "Kirabo Mercy"],
            },
        ],
        teaching: &[
            ("amina@hill.school", "S1 Blue", "Mathematics"),
            ("amina@hill.school", "S2 Green", "Mathematics"),
            ("okello@hill.school", "S2 Red", "Physics"),
        ],
        // Nakato Mary shares a name with S1 Blue's Nakato Sarah: "Nakato" alone is ambiguous
        // between Amina's two Mathematics classes; "Nakato in S1 Blue" is not.
        joined_later: &[("Nakato Mary", "S2 Green")],
    },
    SchoolSeed {
        name: LAKESIDE,
        time_zone: "Africa/Kampala",
        admission_prefix: "LSC",
        campuses: &["Main"],
        departments: &[("Sciences", None)],
        subjects: &[("Biology", "Sciences")],
        staff: &[StaffSeed {
            email: "admin@lakeside.college",
            name: "Sarah Akello",
            user_type: "administrator",
            campus: None,
            role: "school_admin",
            title: "Principal",
        }],
        classes: &[ClassSeed {
            name: "Form 1",
            campus: "Main",
            class_teacher: None,
            students: &["Ochieng Paul", "Nambi Rose", "Lubega Tom"],
        }],
        teaching: &[],
        joined_later: &[],
    },
];

/// A day of the year, as (month, day).
pub(super) type MonthDay = (u32, u32);

/// The three terms of a calendar-year academic year: (name, first day, last day).
pub(super) const TERMS: [(&str, MonthDay, MonthDay); 3] = [
    ("Term 1", (1, 1), (4, 30)),
    ("Term 2", (5, 1), (8, 31)),
    ("Term 3", (9, 1), (12, 31)),
];

/// Each role's permissions, the same in every school.
pub(super) fn role_permissions() -> Vec<(&'static str, Action, Subject)> {
    use Action::{Create, Delete, Read, Update};
    use Subject as S;
    let mut rows = Vec::new();
    let mut grant = |role, actions: &[Action], subjects: &[Subject]| {
        for action in actions {
            for subject in subjects {
                rows.push((role, *action, *subject));
            }
        }
    };
    grant("school_admin", Action::ALL, Subject::ALL);
    grant("campus_admin", &[Read], Subject::ALL);
    grant(
        "campus_admin",
        &[Create, Update],
        &[S::Department, S::Class, S::Student],
    );
    grant(
        "director_of_studies",
        &[Read],
        &[
            S::Department,
            S::Subject,
            S::Class,
            S::Student,
            S::Staff,
            S::TeachingAssignment,
            S::Mark,
            S::Attendance,
        ],
    );
    grant(
        "director_of_studies",
        &[Create, Update, Delete],
        &[S::Subject, S::TeachingAssignment],
    );
    grant("teacher", &[Read], &[S::Department, S::Class, S::Subject]);
    grant("bursar", &[Read], &[S::Student]);
    rows
}

//! The skill library: folder precedence, who sees what, the shipped skills, and load errors that
//! name the file at fault.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

use std::fs;
use std::path::{Path, PathBuf};

use rover_agent::skills::{Skill, SkillError, SkillLibrary};
use rover_contracts::context::Subagent;

/// Writes `<root>/<folder>/<skill>/SKILL.md` with the given text.
fn write_skill_file(root: &Path, folder: &str, skill: &str, text: &str) -> PathBuf {
    let dir = root.join(folder).join(skill);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("SKILL.md");
    fs::write(&path, text).unwrap();
    path
}

/// Writes a well-formed skill whose folder matches its name.
fn write_skill(root: &Path, folder: &str, name: &str, description: &str) -> PathBuf {
    let text =
        format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nDo it well.\n");
    write_skill_file(root, folder, name, &text)
}

fn names(skills: &[&Skill]) -> Vec<String> {
    skills.iter().map(|s| s.name.clone()).collect()
}

/// Loads `root`, expecting an error, and returns its message.
fn load_error(root: &Path) -> String {
    let error = SkillLibrary::load(root).expect_err("the library must refuse this skill");
    error.to_string()
}

#[test]
fn rover_sees_general_then_rover_and_rover_wins_a_shared_name() {
    let root = tempfile::tempdir().unwrap();
    write_skill(
        root.path(),
        "general",
        "scope-context",
        "General advice on scope.",
    );
    write_skill(root.path(), "general", "terms-and-dates", "How terms work.");
    write_skill(
        root.path(),
        "rover",
        "scope-context",
        "Rover's own advice on scope.",
    );
    write_skill(
        root.path(),
        "rover",
        "create-department",
        "How to create a department.",
    );

    let library = SkillLibrary::load(root.path()).unwrap();
    let rover = library.for_agent(None);

    assert_eq!(
        names(&rover),
        ["create-department", "scope-context", "terms-and-dates"],
        "one skill per name, sorted by name"
    );
    let scope = rover.iter().find(|s| s.name == "scope-context").unwrap();
    assert_eq!(scope.description, "Rover's own advice on scope.");
    assert_eq!(scope.path, "/skills/rover/scope-context/SKILL.md");
    let terms = rover.iter().find(|s| s.name == "terms-and-dates").unwrap();
    assert_eq!(terms.path, "/skills/general/terms-and-dates/SKILL.md");
}

#[test]
fn a_subagent_sees_general_and_its_own_folder_never_rovers() {
    let root = tempfile::tempdir().unwrap();
    write_skill(
        root.path(),
        "general",
        "scope-context",
        "General advice on scope.",
    );
    write_skill(root.path(), "rover", "create-department", "Rover only.");
    write_skill(
        root.path(),
        "rover",
        "take-attendance",
        "Rover's version, never a subagent's.",
    );
    write_skill(
        root.path(),
        "class_teacher",
        "take-attendance",
        "The class teacher's way.",
    );
    write_skill(
        root.path(),
        "subject_teacher",
        "record-marks",
        "The subject teacher's way.",
    );

    let library = SkillLibrary::load(root.path()).unwrap();

    let class_teacher = library.for_agent(Some(Subagent::ClassTeacher));
    assert_eq!(names(&class_teacher), ["scope-context", "take-attendance"]);
    assert!(
        class_teacher
            .iter()
            .all(|s| !s.path.starts_with("/skills/rover/")),
        "a subagent inherits nothing from Rover: {class_teacher:?}"
    );
    assert_eq!(
        class_teacher[1].path,
        "/skills/class_teacher/take-attendance/SKILL.md"
    );

    let director = library.for_agent(Some(Subagent::DirectorOfStudies));
    assert_eq!(
        names(&director),
        ["scope-context"],
        "a subagent without a folder still gets general"
    );

    // The scoped reads follow the same rule as the listing.
    assert!(
        library
            .read_as(
                Some(Subagent::ClassTeacher),
                "/skills/rover/create-department/SKILL.md"
            )
            .is_none()
    );
    assert!(
        library
            .read_as(None, "/skills/rover/create-department/SKILL.md")
            .is_some()
    );
    assert_eq!(
        library.list_dir_as(Some(Subagent::ClassTeacher), "/skills"),
        ["general", "class_teacher"]
    );
    assert!(
        library
            .list_dir_as(Some(Subagent::ClassTeacher), "/skills/rover")
            .is_empty()
    );
}

#[test]
fn read_and_list_by_virtual_path() {
    let root = tempfile::tempdir().unwrap();
    write_skill(
        root.path(),
        "general",
        "scope-context",
        "General advice on scope.",
    );
    write_skill(
        root.path(),
        "rover",
        "create-department",
        "How to create a department.",
    );
    write_skill(
        root.path(),
        "rover",
        "delegating",
        "When to hand work over.",
    );

    let library = SkillLibrary::load(root.path()).unwrap();

    let skill = library
        .read("/skills/rover/create-department/SKILL.md")
        .expect("the skill is at its virtual path");
    assert_eq!(skill.name, "create-department");
    assert_eq!(skill.description, "How to create a department.");
    assert!(
        skill.body.starts_with("# create-department"),
        "{:?}",
        skill.body
    );
    assert!(
        !skill.body.contains("description:"),
        "the front matter is not part of the body"
    );

    assert!(library.read("/skills/rover/create-department").is_none());
    assert!(
        library
            .read("/skills/general/create-department/SKILL.md")
            .is_none()
    );
    assert!(
        library
            .read("/skills/rover/../rover/create-department/SKILL.md")
            .is_none()
    );
    assert!(library.read("/notes/SKILL.md").is_none());

    assert_eq!(library.list_dir("/skills/"), ["general", "rover"]);
    assert_eq!(
        library.list_dir("/skills/rover"),
        ["create-department", "delegating"]
    );
    assert_eq!(library.list_dir("/skills/rover/delegating/"), ["SKILL.md"]);
    assert!(library.list_dir("/skills/class_teacher").is_empty());
    assert!(library.list_dir("/skills/rover/nope").is_empty());
}

#[test]
fn the_shipped_skills_load_and_each_has_a_description() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../skills");
    let library = SkillLibrary::load(&root).unwrap_or_else(|e| panic!("{e}"));

    let mut agents = vec![None];
    agents.extend(Subagent::ALL.map(Some));
    for agent in agents {
        let skills = library.for_agent(agent);
        assert!(
            skills
                .iter()
                .any(|s| s.path.starts_with("/skills/general/")),
            "{agent:?} gets the general skills"
        );
        assert!(
            skills
                .iter()
                .any(|s| !s.path.starts_with("/skills/general/")),
            "{agent:?} has skills of its own"
        );
        for skill in skills {
            assert!(
                !skill.description.is_empty(),
                "{} has a description",
                skill.path
            );
            assert!(
                skill.body.lines().count() <= 40,
                "{} is at most 40 lines",
                skill.path
            );
            assert_eq!(library.read(&skill.path), Some(skill));
        }
    }
    for path in [
        "/skills/general/scope-context/SKILL.md",
        "/skills/general/terms-and-dates/SKILL.md",
        "/skills/rover/create-department/SKILL.md",
        "/skills/rover/delegating/SKILL.md",
        "/skills/class_teacher/take-attendance/SKILL.md",
        "/skills/subject_teacher/record-marks/SKILL.md",
        "/skills/director_of_studies/assign-teachers/SKILL.md",
    ] {
        assert!(library.read(path).is_some(), "{path} ships");
    }
}

#[test]
fn a_file_without_front_matter_fails_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    write_skill(root.path(), "general", "fine", "A good skill.");
    let bad = write_skill_file(
        root.path(),
        "rover",
        "plain",
        "# Just Markdown\n\nNo front matter.\n",
    );

    let message = load_error(root.path());
    assert!(message.contains(&bad.display().to_string()), "{message}");
    assert!(message.contains("front matter"), "{message}");
}

#[test]
fn unclosed_or_malformed_front_matter_fails_naming_the_file() {
    let unclosed = tempfile::tempdir().unwrap();
    let path = write_skill_file(
        unclosed.path(),
        "rover",
        "open",
        "---\nname: open\ndescription: Never closed.\n# Body\n",
    );
    let message = load_error(unclosed.path());
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("closing `---`"), "{message}");

    let malformed = tempfile::tempdir().unwrap();
    let path = write_skill_file(
        malformed.path(),
        "general",
        "broken",
        "---\nname: [broken\ndescription: Bad YAML.\n---\nBody.\n",
    );
    let message = load_error(malformed.path());
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("YAML"), "{message}");
}

#[test]
fn a_missing_name_or_description_fails_naming_the_file() {
    let no_name = tempfile::tempdir().unwrap();
    let path = write_skill_file(
        no_name.path(),
        "rover",
        "nameless",
        "---\ndescription: Has no name.\n---\nBody.\n",
    );
    let error = SkillLibrary::load(no_name.path()).unwrap_err();
    assert!(
        matches!(error, SkillError::MissingField { field: "name", .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("`name`"), "{message}");

    let no_description = tempfile::tempdir().unwrap();
    let path = write_skill_file(
        no_description.path(),
        "class_teacher",
        "quiet",
        "---\nname: quiet\ndescription: \"  \"\n---\nBody.\n",
    );
    let message = load_error(no_description.path());
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("`description`"), "{message}");
}

#[test]
fn a_name_that_differs_from_its_folder_fails_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let path = write_skill_file(
        root.path(),
        "rover",
        "create-department",
        "---\nname: make-department\ndescription: Misnamed.\n---\nBody.\n",
    );

    let error = SkillLibrary::load(root.path()).unwrap_err();
    assert!(
        matches!(error, SkillError::NameMismatch { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("make-department"), "{message}");
    assert!(message.contains("create-department"), "{message}");
}

#[test]
fn a_name_that_is_not_kebab_case_fails_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let path = write_skill_file(
        root.path(),
        "rover",
        "Create_Department",
        "---\nname: Create_Department\ndescription: Shouty.\n---\nBody.\n",
    );

    let message = load_error(root.path());
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("kebab-case"), "{message}");
}

#[test]
fn a_skill_folder_without_skill_md_fails_naming_the_folder() {
    let root = tempfile::tempdir().unwrap();
    let folder = root.path().join("rover").join("empty");
    fs::create_dir_all(&folder).unwrap();

    let message = load_error(root.path());
    assert!(message.contains(&folder.display().to_string()), "{message}");
    assert!(message.contains("SKILL.md"), "{message}");
}

#[test]
fn a_missing_root_is_an_error_and_missing_folders_are_not() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("nowhere");
    let error = SkillLibrary::load(&missing).unwrap_err();
    assert!(matches!(error, SkillError::Root { .. }), "{error:?}");
    assert!(error.to_string().contains(&missing.display().to_string()));

    let file = root.path().join("file");
    fs::write(&file, "not a folder").unwrap();
    assert!(matches!(
        SkillLibrary::load(&file),
        Err(SkillError::Root { .. })
    ));

    let library =
        SkillLibrary::load(root.path()).expect("an empty root is a library with no skills");
    assert!(library.for_agent(None).is_empty());
}

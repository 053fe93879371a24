//! Authorization for Rover: casbin RBAC with domains, where the domain is the school.
//!
//! An [`Authorizer`] is built per call from the school's *live* policy rows and role assignments
//! (read inside the tenant transaction), so a role change applies on the very next call. It answers
//! two questions: may this user do `action:Subject` here ([`Authorizer::decide`], with the rule that
//! decided, for traces), and what is everything they may do ([`Authorizer::snapshot`], the advisory
//! list in the runtime context).
//!
//! Building a casbin enforcer costs far more than the call it guards, so the enforcer built from a
//! school's rows is kept and reused while the live rows are *exactly* those rows (see [`Built`]);
//! nothing else is cached, and no version number has to be remembered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use casbin::{CoreApi, DefaultModel, Enforcer, MemoryAdapter, MgmtApi, RbacApi};
use rover_contracts::ids::{SchoolId, UserId};
use rover_contracts::permission::{Permission, PermissionSnapshot};

/// The casbin model: RBAC with domains. A request is (user, school, subject, action); a policy
/// grants a role an action on a subject in one school; `g` assigns users to roles per school.
pub const MODEL: &str = r#"
[request_definition]
r = sub, dom, obj, act

[policy_definition]
p = sub, dom, obj, act

[role_definition]
g = _, _, _

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = g(r.sub, p.sub, r.dom) && r.dom == p.dom && r.obj == p.obj && r.act == p.act
"#;

/// A policy row: `role` may `permission` in the school.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRow {
    /// The role (`school_admin`, `teacher`, …).
    pub role: String,
    /// What it allows.
    pub permission: Permission,
}

/// A role assignment: `user_id` holds `role` in the school.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleAssignment {
    /// The user.
    pub user_id: UserId,
    /// The role.
    pub role: String,
}

/// Authorization could not be evaluated (a broken model or rule — a bug, never a denial).
#[derive(Debug, thiserror::Error)]
#[error("authorization failed: {0}")]
pub struct AuthzError(#[from] casbin::Error);

/// The outcome of a permission check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the action is allowed.
    pub allowed: bool,
    /// The rule that allowed it (`role teacher may read:Department`), or why nothing did.
    pub rule: String,
}

/// One school's live policy, ready to answer questions.
pub struct Authorizer {
    built: Arc<Built>,
    domain: String,
}

/// An enforcer with the exact rows it was built from, and the decisions it has made.
///
/// Why this cache cannot go stale: its key is not a version someone must remember to bump but the
/// rows themselves, which the caller has just read live in its transaction. The enforcer is
/// reused only when those rows equal, row for row and in order, the ones it was built from; any
/// change to a policy or a role assignment makes them differ, so that very call builds afresh
/// (and replaces the entry). A `Built` never changes after it is made, so neither can the
/// answers memoised in it.
struct Built {
    policies: Vec<PolicyRow>,
    assignments: Vec<RoleAssignment>,
    enforcer: Enforcer,
    /// `decide` answers by (user, permission): evaluating casbin's matcher is itself costly.
    decisions: Mutex<HashMap<(UserId, Permission), Decision>>,
}

/// At most this many schools' enforcers are kept (and decisions per enforcer); past it the map
/// starts over. Memory stays bounded however many schools or users one process serves.
const MAX_ENTRIES: usize = 4096;

/// The last enforcer built for each school.
fn built_by_school() -> &'static Mutex<HashMap<SchoolId, Arc<Built>>> {
    static BUILT: OnceLock<Mutex<HashMap<SchoolId, Arc<Built>>>> = OnceLock::new();
    BUILT.get_or_init(Mutex::default)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("school", &self.domain)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    /// The school's policy as these rows state it: the enforcer already built from exactly these
    /// rows if there is one, else a new one (which then replaces it).
    pub async fn build(
        school: SchoolId,
        policies: &[PolicyRow],
        assignments: &[RoleAssignment],
    ) -> Result<Self, AuthzError> {
        let domain = school.to_string();
        let cached = lock(built_by_school()).get(&school).cloned();
        if let Some(built) = cached
            && built.policies == policies
            && built.assignments == assignments
        {
            return Ok(Self { built, domain });
        }
        let built = Arc::new(Built {
            policies: policies.to_vec(),
            assignments: assignments.to_vec(),
            enforcer: enforcer(&domain, policies, assignments).await?,
            decisions: Mutex::default(),
        });
        let mut by_school = lock(built_by_school());
        if by_school.len() >= MAX_ENTRIES && !by_school.contains_key(&school) {
            by_school.clear();
        }
        by_school.insert(school, built.clone());
        Ok(Self { built, domain })
    }

    /// May `user` do `permission` in this school? Also says which rule decided.
    pub fn decide(&self, user: UserId, permission: Permission) -> Result<Decision, AuthzError> {
        if let Some(decision) = lock(&self.built.decisions).get(&(user, permission)) {
            return Ok(decision.clone());
        }
        let decision = self.evaluate(user, permission)?;
        let mut decisions = lock(&self.built.decisions);
        if decisions.len() >= MAX_ENTRIES {
            decisions.clear();
        }
        decisions.insert((user, permission), decision.clone());
        Ok(decision)
    }

    fn evaluate(&self, user: UserId, permission: Permission) -> Result<Decision, AuthzError> {
        let enforcer = &self.built.enforcer;
        let (subject, action) = (
            permission.subject.to_string(),
            permission.action.to_string(),
        );
        let allowed = enforcer.enforce((
            user.to_string(),
            self.domain.clone(),
            subject.clone(),
            action.clone(),
        ))?;
        let deciding_role = allowed
            .then(|| {
                self.roles(user).into_iter().find(|role| {
                    enforcer.has_policy(vec![
                        role.clone(),
                        self.domain.clone(),
                        subject.clone(),
                        action.clone(),
                    ])
                })
            })
            .flatten();
        let rule = match deciding_role {
            Some(role) => format!("role {role} may {permission}"),
            None => format!("no role of this user grants {permission}"),
        };
        Ok(Decision { allowed, rule })
    }

    /// The roles `user` holds in this school.
    pub fn roles(&self, user: UserId) -> Vec<String> {
        let mut roles = self
            .built
            .enforcer
            .get_implicit_roles_for_user(&user.to_string(), Some(&self.domain));
        roles.sort();
        roles
    }

    /// Everything `user` may do in this school, flattened to `action:Subject` pairs (advisory).
    pub fn snapshot(&self, user: UserId) -> PermissionSnapshot {
        let permissions = self
            .built
            .enforcer
            .get_implicit_permissions_for_user(&user.to_string(), Some(&self.domain))
            .into_iter()
            .filter_map(|rule| {
                // rule = [role, domain, subject, action]
                let (subject, action) = (rule.get(2)?, rule.get(3)?);
                format!("{action}:{subject}").parse().ok()
            })
            .collect();
        PermissionSnapshot::new(permissions)
    }
}

/// A casbin enforcer loaded with the school's rules and role links.
async fn enforcer(
    domain: &str,
    policies: &[PolicyRow],
    assignments: &[RoleAssignment],
) -> Result<Enforcer, AuthzError> {
    let model = DefaultModel::from_str(MODEL).await?;
    let mut enforcer = Enforcer::new(model, MemoryAdapter::default()).await?;
    let rules = policies
        .iter()
        .map(|p| {
            vec![
                p.role.clone(),
                domain.to_owned(),
                p.permission.subject.to_string(),
                p.permission.action.to_string(),
            ]
        })
        .collect::<Vec<_>>();
    if !rules.is_empty() {
        enforcer.add_policies(rules).await?;
    }
    let links = assignments
        .iter()
        .map(|a| vec![a.user_id.to_string(), a.role.clone(), domain.to_owned()])
        .collect::<Vec<_>>();
    if !links.is_empty() {
        enforcer.add_grouping_policies(links).await?;
    }
    Ok(enforcer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rover_contracts::permission::{Action, Subject};

    fn p(role: &str, action: Action, subject: Subject) -> PolicyRow {
        PolicyRow {
            role: role.into(),
            permission: Permission::new(action, subject),
        }
    }

    #[tokio::test]
    async fn decides_from_roles_in_the_school_and_names_the_rule() {
        let school = SchoolId::new();
        let (teacher, bursar, stranger) = (UserId::new(), UserId::new(), UserId::new());
        let policies = [
            p("teacher", Action::Read, Subject::Department),
            p("bursar", Action::Read, Subject::Student),
        ];
        let assignments = [
            RoleAssignment {
                user_id: teacher,
                role: "teacher".into(),
            },
            RoleAssignment {
                user_id: bursar,
                role: "bursar".into(),
            },
        ];
        let authz = Authorizer::build(school, &policies, &assignments)
            .await
            .unwrap();
        let read_department = Permission::new(Action::Read, Subject::Department);
        let decision = authz.decide(teacher, read_department).unwrap();
        assert_eq!(
            decision,
            Decision {
                allowed: true,
                rule: "role teacher may read:Department".into()
            }
        );
        assert!(!authz.decide(bursar, read_department).unwrap().allowed);
        assert!(!authz.decide(stranger, read_department).unwrap().allowed);
        let denied = authz
            .decide(
                teacher,
                Permission::new(Action::Create, Subject::Department),
            )
            .unwrap();
        assert_eq!(denied.rule, "no role of this user grants create:Department");
        assert_eq!(authz.roles(teacher), ["teacher"]);
    }

    #[tokio::test]
    async fn snapshot_flattens_every_permission_of_every_role() {
        let school = SchoolId::new();
        let user = UserId::new();
        let policies = [
            p("teacher", Action::Read, Subject::Department),
            p("teacher", Action::Read, Subject::Class),
            p(
                "director_of_studies",
                Action::Create,
                Subject::TeachingAssignment,
            ),
            p("bursar", Action::Read, Subject::Student),
        ];
        let assignments = [
            RoleAssignment {
                user_id: user,
                role: "teacher".into(),
            },
            RoleAssignment {
                user_id: user,
                role: "director_of_studies".into(),
            },
        ];
        let authz = Authorizer::build(school, &policies, &assignments)
            .await
            .unwrap();
        let snapshot: Vec<String> = authz.snapshot(user).iter().map(|p| p.to_string()).collect();
        assert_eq!(
            snapshot,
            ["read:Department", "read:Class", "create:TeachingAssignment"]
        );
        assert!(authz.snapshot(UserId::new()).iter().next().is_none());
    }

    #[tokio::test]
    async fn a_policy_or_role_change_is_seen_by_the_very_next_build() {
        let school = SchoolId::new();
        let user = UserId::new();
        let read_department = Permission::new(Action::Read, Subject::Department);
        let policies = vec![p("teacher", Action::Read, Subject::Department)];
        let assigned = vec![RoleAssignment {
            user_id: user,
            role: "teacher".into(),
        }];
        let allowed = |policies: Vec<PolicyRow>, assignments: Vec<RoleAssignment>| async move {
            let authz = Authorizer::build(school, &policies, &assignments)
                .await
                .unwrap();
            // Twice: the second answer comes from the memo and must agree with the first.
            let first = authz.decide(user, read_department).unwrap();
            assert_eq!(authz.decide(user, read_department).unwrap(), first);
            (first.allowed, authz.snapshot(user).iter().count())
        };
        assert_eq!(allowed(policies.clone(), assigned.clone()).await, (true, 1));
        // The role is taken away: denied at once, though an enforcer for this school is cached.
        assert_eq!(allowed(policies.clone(), Vec::new()).await, (false, 0));
        // Given back: allowed again.
        assert_eq!(allowed(policies.clone(), assigned.clone()).await, (true, 1));
        // The policy row is removed while the role stays: denied.
        assert_eq!(allowed(Vec::new(), assigned.clone()).await, (false, 0));
        // The role now grants something else instead: still denied for this permission.
        let other = vec![p("teacher", Action::Read, Subject::Class)];
        assert_eq!(allowed(other, assigned.clone()).await, (false, 1));
        // The same rows in another school decide nothing here, and vice versa.
        let elsewhere = Authorizer::build(SchoolId::new(), &policies, &[])
            .await
            .unwrap();
        assert!(!elsewhere.decide(user, read_department).unwrap().allowed);
        assert_eq!(allowed(policies, assigned).await, (true, 1));
    }

    #[tokio::test]
    async fn an_empty_school_denies_everything() {
        let authz = Authorizer::build(SchoolId::new(), &[], &[]).await.unwrap();
        assert!(
            !authz
                .decide(
                    UserId::new(),
                    Permission::new(Action::Read, Subject::Department)
                )
                .unwrap()
                .allowed
        );
    }
}

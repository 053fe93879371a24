//! Authorization for Rover: casbin RBAC with domains, where the domain is the school.
//!
//! An [`Authorizer`] is built per call from the school's *live* policy rows and role assignments
//! (read inside the tenant transaction), so a role change applies on the very next call. It answers
//! two questions: may this user do `action:Subject` here ([`Authorizer::decide`], with the rule that
//! decided, for traces), and what is everything they may do ([`Authorizer::snapshot`], the advisory
//! list in the runtime context).

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
    enforcer: Enforcer,
    domain: String,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("school", &self.domain)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    /// Builds the school's policy from its rows.
    pub async fn build(
        school: SchoolId,
        policies: &[PolicyRow],
        assignments: &[RoleAssignment],
    ) -> Result<Self, AuthzError> {
        let domain = school.to_string();
        let model = DefaultModel::from_str(MODEL).await?;
        let mut enforcer = Enforcer::new(model, MemoryAdapter::default()).await?;
        let rules = policies
            .iter()
            .map(|p| {
                vec![
                    p.role.clone(),
                    domain.clone(),
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
            .map(|a| vec![a.user_id.to_string(), a.role.clone(), domain.clone()])
            .collect::<Vec<_>>();
        if !links.is_empty() {
            enforcer.add_grouping_policies(links).await?;
        }
        Ok(Self { enforcer, domain })
    }

    /// May `user` do `permission` in this school? Also says which rule decided.
    pub fn decide(&self, user: UserId, permission: Permission) -> Result<Decision, AuthzError> {
        let (subject, action) = (
            permission.subject.to_string(),
            permission.action.to_string(),
        );
        let allowed = self.enforcer.enforce((
            user.to_string(),
            self.domain.clone(),
            subject.clone(),
            action.clone(),
        ))?;
        let deciding_role = allowed
            .then(|| {
                self.roles(user).into_iter().find(|role| {
                    self.enforcer.has_policy(vec![
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
            .enforcer
            .get_implicit_roles_for_user(&user.to_string(), Some(&self.domain));
        roles.sort();
        roles
    }

    /// Everything `user` may do in this school, flattened to `action:Subject` pairs (advisory).
    pub fn snapshot(&self, user: UserId) -> PermissionSnapshot {
        let permissions = self
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

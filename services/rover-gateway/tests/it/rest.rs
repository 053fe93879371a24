//! The REST API in-process (`oneshot` on the whole router): departments, classes, students and
//! staff through the same permission check, domain functions and audit rows as the tools; denials,
//! campus scope, tenancy and malformed requests; the label registry, the OpenAPI document and
//! `tool-contracts.json`. Each test gets its own database and vhost.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use chrono::Utc;
use rover_contracts::ErrorCode;
use rover_contracts::tools::{
    CreateDepartment, CreateDepartmentArgs, Department, NoArgs, REGISTRY, RenamedDepartment, Tool,
};
use rover_domain::testing::TestDb;
use rover_gateway::Settings;
use rover_gateway::{AppState, Shared};
use rover_gateway::{Authenticator, dev_token};
use rover_gateway::{ErrorBody, ErrorDetail, tool_contracts_json};
use rover_gateway::{REGENERATE_COMMAND, TOOL_CONTRACTS_FILE};
use rover_settings::Secret;
use rover_testkit::{TestVhost, TurnKeys, within};
use serde_json::{Value, json};
use sqlx::PgPool;
use tower::ServiceExt as _;
use uuid::Uuid;

pub(crate) const ADMIN: &str = "admin@hill.school";
const KOLOLO_ADMIN: &str = "kololo.admin@hill.school";
const BURSAR: &str = "bursar@hill.school";
const TEACHER: &str = "amina@hill.school";
const LAKESIDE_ADMIN: &str = "admin@lakeside.college";

/// The gateway's router over a fresh database and vhost, and a way to look behind its back.
pub(crate) struct Rest {
    pub(crate) router: Router,
    pub(crate) state: AppState,
    pub(crate) db: TestDb,
    /// Connected as the owner role (bypasses row-level security): for checking effects.
    pub(crate) owner: PgPool,
    _keys: TurnKeys,
    // Dropped last, after the broker connection in `state`.
    pub(crate) vhost: TestVhost,
}

/// A response: status and JSON body (`Null` when empty).
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
}

impl Reply {
    /// The error body, checked to be exactly the documented shape.
    pub(crate) fn error(&self) -> ErrorDetail {
        serde_json::from_value::<ErrorBody>(self.body.clone())
            .unwrap_or_else(|e| panic!("not an error body ({e}): {}", self.body))
            .error
    }
}

pub(crate) async fn spawn_rest() -> Rest {
    spawn_rest_with(|_| {}).await
}

/// [`spawn_rest`] with settings changed by `configure`.
pub(crate) async fn spawn_rest_with(configure: impl FnOnce(&mut Settings)) -> Rest {
    let vhost = TestVhost::create();
    let db = TestDb::new().await;
    let keys = TurnKeys::generate();
    let mut settings = Settings::default();
    settings.auth.development = true;
    configure(&mut settings);
    settings.amqp.url = Secret::new(vhost.url());
    settings.database.url = Secret::new(db.app_url().to_owned());
    // The topology the services declare, so a chat turn can be published (no worker takes it).
    let (broker, topology) = within(
        "connect to the broker",
        rover_messaging::connect_service(&settings.amqp, "rover-gateway-test"),
    )
    .await
    .expect("the broker is reachable");
    let publisher = broker.publisher();
    let events = rover_gateway::TurnEvents::start(&broker, &topology)
        .await
        .expect("subscribe to turn events");
    let auth = Authenticator::new(&settings.auth).expect("the default auth settings load");
    let (metrics, registry) = rover_gateway::metrics();
    let resumes = rover_gateway::StreamSlots::new(settings.chat.max_resumes_per_user);
    let proxies = rover_gateway::TrustedProxies::parse(&settings.http.trusted_proxies)
        .expect("the trusted proxies parse");
    let state = AppState(Arc::new(Shared {
        resumes,
        events,
        proxies,
        settings,
        pool: db.pool.clone(),
        broker,
        publisher,
        topology,
        auth,
        signer: keys.signer(),
        questions: rover_gateway::Questions::new(&keys.signer())
            .expect("the approval secret derives"),
        metrics,
        registry,
    }));
    let owner = PgPool::connect(db.owner_url())
        .await
        .expect("connect as the owner");
    Rest {
        router: rover_gateway::router(state.clone()),
        state,
        db,
        owner,
        _keys: keys,
        vhost,
    }
}

impl Rest {
    pub(crate) fn token(&self, email: &str) -> String {
        dev_token(
            &self.state.settings.auth,
            self.db.ids.user(email),
            email,
            Utc::now(),
        )
        .expect("mint a development token")
    }

    /// A request as `email` (no `Authorization` header when `None`).
    pub(crate) fn request(
        &self,
        method: Method,
        path: &str,
        email: Option<&str>,
    ) -> axum::http::request::Builder {
        let builder = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "localhost");
        match email {
            Some(email) => builder.header(
                header::AUTHORIZATION,
                format!("Bearer {}", self.token(email)),
            ),
            None => builder,
        }
    }

    pub(crate) async fn send(&self, request: Request<Body>) -> Reply {
        let response = within("the router answers", self.router.clone().oneshot(request))
            .await
            .expect("the router is infallible");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("read the body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!(
                    "{status}: the body is not JSON ({e}): {}",
                    String::from_utf8_lossy(&bytes)
                )
            })
        };
        Reply { status, body }
    }

    /// Sends `request` and returns its status and headers, dropping the body unread (a chat
    /// stream, as a client that goes away).
    pub(crate) async fn send_raw(
        &self,
        request: Request<Body>,
    ) -> (StatusCode, axum::http::HeaderMap) {
        let response = within("the router answers", self.router.clone().oneshot(request))
            .await
            .expect("the router is infallible");
        (response.status(), response.headers().clone())
    }

    pub(crate) async fn get(&self, email: &str, path: &str) -> Reply {
        self.send(
            self.request(Method::GET, path, Some(email))
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }

    /// A JSON request with a raw body, so malformed bodies can be sent too.
    pub(crate) async fn json(&self, method: Method, email: &str, path: &str, body: &str) -> Reply {
        let request = self
            .request(method, path, Some(email))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        self.send(request).await
    }

    pub(crate) async fn post(&self, email: &str, path: &str, body: Value) -> Reply {
        self.json(Method::POST, email, path, &body.to_string())
            .await
    }

    pub(crate) async fn patch(&self, email: &str, path: &str, body: Value) -> Reply {
        self.json(Method::PATCH, email, path, &body.to_string())
            .await
    }

    /// Starts a chat turn as `email` in chat `chat`: the status, headers and (for an error) the
    /// body. A started turn's stream is dropped at once, as a client that goes away would.
    pub(crate) async fn start_turn(
        &self,
        email: &str,
        chat: &str,
    ) -> (StatusCode, axum::http::HeaderMap, Value) {
        let body = json!({ "id": chat, "trigger": "submit-message", "messages": [{ "id": "m1", "role": "user", "parts": [{ "type": "text", "text": "List the departments" }] }] });
        let request = self
            .request(Method::POST, "/api/chat", Some(email))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = within("the router answers", self.router.clone().oneshot(request))
            .await
            .expect("the router is infallible");
        let (status, headers) = (response.status(), response.headers().clone());
        if status.is_success() {
            return (status, headers, Value::Null);
        }
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("read the body");
        let body = serde_json::from_slice(&bytes).expect("an error body is JSON");
        (status, headers, body)
    }

    /// Ends every open turn of `email`'s, as the worker does when it records a turn's `finish`.
    pub(crate) async fn finish_turns_of(&self, email: &str) {
        let user = self.db.ids.user(email);
        let turns: Vec<(Uuid, Uuid)> =
            sqlx::query_as("SELECT school_id, turn_id FROM open_turns WHERE user_id = $1")
                .bind(user.as_uuid())
                .fetch_all(&self.owner)
                .await
                .expect("read open turns");
        for (school, turn) in turns {
            let school = rover_contracts::ids::SchoolId::from_uuid(school);
            let mut tx = rover_domain::begin_tenant(&self.db.pool, school)
                .await
                .expect("begin");
            rover_turnstore::open_turns::close_turn(
                &mut tx,
                rover_contracts::ids::TurnId::from_uuid(turn),
            )
            .await
            .expect("close the turn");
            tx.commit().await.expect("commit");
        }
    }

    /// Moves every open turn's expiry into the past, as if their identities had run out.
    pub(crate) async fn expire_open_turns(&self) {
        sqlx::query("UPDATE open_turns SET expires_at = now() - interval '1 second'")
            .execute(&self.owner)
            .await
            .expect("expire open turns");
    }

    pub(crate) async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&self.owner)
            .await
            .expect("count rows")
    }

    async fn department_name(&self, id: Uuid) -> Option<String> {
        sqlx::query_scalar("SELECT name FROM departments WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.owner)
            .await
            .expect("read a department")
    }

    /// Every audit row, oldest first.
    async fn audit_rows(&self) -> Vec<AuditRow> {
        sqlx::query_as(
            "SELECT school_id, campus_id, actor_user_id, actor_email, event, subject_id, call_id, \
             before, after FROM audit_log ORDER BY id",
        )
        .fetch_all(&self.owner)
        .await
        .expect("read the audit log")
    }
}

#[derive(Debug, sqlx::FromRow)]
struct AuditRow {
    school_id: Uuid,
    campus_id: Option<Uuid>,
    actor_user_id: Uuid,
    actor_email: String,
    event: String,
    subject_id: String,
    call_id: Option<String>,
    before: Option<Value>,
    after: Option<Value>,
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| item["name"].as_str().expect("a name"))
        .collect()
}

/// `value` with its top-level `id` replaced, to compare rows created in different transactions.
fn with_id(mut value: Value, id: &Value) -> Value {
    value["id"] = id.clone();
    value
}

#[tokio::test]
async fn departments_are_listed_created_and_renamed_with_one_audit_row_per_write() {
    let rest = spawn_rest().await;
    let ids = &rest.db.ids;

    // GET answers exactly what the domain function answers for the same caller.
    let listed = rest.get(ADMIN, "/api/departments").await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(
        names(&listed.body),
        ["Humanities", "Kololo Arts", "Languages", "Mathematics"]
    );
    let admin = ids.actor(ADMIN);
    let scope = rover_contracts::context::CallScope {
        school_id: ids.hill,
        run_mode: rover_contracts::context::RunMode::School,
    };
    let mut tx = rover_domain::begin_tenant(&rest.db.pool, ids.hill)
        .await
        .unwrap();
    let direct = rover_domain::list_departments(&mut tx, &admin, &scope, &NoArgs {})
        .await
        .unwrap();
    assert_eq!(listed.body, serde_json::to_value(&direct).unwrap());
    // What the domain function would write for this create (rolled back: the REST call does it).
    let args = CreateDepartmentArgs {
        name: "Sciences".into(),
    };
    let expected = rover_domain::create_department(&mut tx, &admin, &scope, &args)
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    // POST: 201 with the department; one row, one audit row naming who, what and the change.
    let created = rest
        .post(ADMIN, "/api/departments", json!({ "name": "Sciences" }))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let department: Department = serde_json::from_value(created.body.clone()).unwrap();
    assert_eq!(
        (department.name.as_str(), department.campus.as_ref()),
        ("Sciences", None)
    );
    let id = created.body["id"].clone();
    assert_eq!(
        created.body,
        with_id(serde_json::to_value(&expected.output).unwrap(), &id)
    );
    assert_eq!(
        rest.department_name(department.id.as_uuid())
            .await
            .as_deref(),
        Some("Sciences")
    );
    let rows = rest.audit_rows().await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row.event, "create.department");
    assert_eq!(
        (row.actor_user_id, row.actor_email.as_str()),
        (admin.user_id.as_uuid(), ADMIN)
    );
    assert_eq!((row.school_id, row.campus_id), (ids.hill.as_uuid(), None));
    assert_eq!(row.subject_id, department.id.to_string());
    assert_eq!(row.call_id, None, "a REST write is no tool call");
    assert_eq!(row.before, expected.change.before);
    assert_eq!(row.after, Some(with_id(expected.change.after.clone(), &id)));
    assert_eq!(row.after.as_ref(), Some(&created.body));

    // PATCH: renamed, with the previous name; a second audit row with before and after.
    let renamed = rest
        .patch(
            ADMIN,
            &format!("/api/departments/{}", department.id),
            json!({ "name": "Natural Sciences" }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    let renamed: RenamedDepartment = serde_json::from_value(renamed.body).unwrap();
    assert_eq!(renamed.previous_name, "Sciences");
    assert_eq!(
        renamed.department,
        Department {
            name: "Natural Sciences".into(),
            ..department.clone()
        }
    );
    assert_eq!(
        rest.department_name(department.id.as_uuid())
            .await
            .as_deref(),
        Some("Natural Sciences")
    );
    let rows = rest.audit_rows().await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    let row = &rows[1];
    assert_eq!(
        (
            row.event.as_str(),
            row.actor_email.as_str(),
            row.subject_id.as_str()
        ),
        (
            "rename.department",
            ADMIN,
            department.id.to_string().as_str()
        )
    );
    assert_eq!(row.before.as_ref().unwrap()["name"], "Sciences");
    assert_eq!(
        row.after,
        Some(serde_json::to_value(&renamed.department).unwrap())
    );

    // The list shows it.
    let listed = rest.get(ADMIN, "/api/departments").await;
    assert!(names(&listed.body).contains(&"Natural Sciences"));
}

#[tokio::test]
async fn denials_are_403_with_the_tools_reason_and_write_nothing() {
    let rest = spawn_rest().await;
    let departments = rest.count("departments").await;

    let denied = rest
        .post(BURSAR, "/api/departments", json!({ "name": "Bursary" }))
        .await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{}", denied.body);
    assert_eq!(
        denied.body,
        json!({ "error": { "code": "permission_denied", "message": "Permission denied: create:Department" } })
    );
    // The reason is built from the tool's own contract, as the tool server builds it.
    let permission = CreateDepartment::CONTRACT.required_permission().unwrap();
    assert_eq!(
        denied.error().message,
        format!("Permission denied: {permission}")
    );

    let denied = rest.get(TEACHER, "/api/students?query=Nakato").await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{}", denied.body);
    assert_eq!(
        denied.error(),
        ErrorDetail {
            code: ErrorCode::PermissionDenied,
            message: "Permission denied: read:Student".into()
        }
    );
    // A teacher may list departments, a bursar may not rename one.
    assert_eq!(
        rest.get(TEACHER, "/api/departments").await.status,
        StatusCode::OK
    );
    let languages = rest.db.ids.department("Languages");
    let denied = rest
        .patch(
            BURSAR,
            &format!("/api/departments/{languages}"),
            json!({ "name": "Tongues" }),
        )
        .await;
    assert_eq!(
        denied.error().message,
        "Permission denied: update:Department"
    );

    assert_eq!(rest.count("departments").await, departments);
    assert_eq!(rest.count("audit_log").await, 0);
    assert_eq!(
        rest.department_name(languages.as_uuid()).await.as_deref(),
        Some("Languages")
    );
}

#[tokio::test]
async fn the_permission_check_reads_live_policy_rows_on_every_call() {
    let rest = spawn_rest().await;
    let body = json!({ "name": "Bursary" });
    assert_eq!(
        rest.post(BURSAR, "/api/departments", body.clone())
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    // Grant the bursar role the permission: the very next call sees it.
    sqlx::query(
        "INSERT INTO authz_policies (school_id, role, action, subject) \
         VALUES ($1, 'bursar', 'create', 'Department')",
    )
    .bind(rest.db.ids.hill.as_uuid())
    .execute(&rest.owner)
    .await
    .unwrap();
    let created = rest.post(BURSAR, "/api/departments", body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let rows = rest.audit_rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].actor_email, BURSAR);
}

#[tokio::test]
async fn a_campus_admin_reads_and_writes_only_within_their_campus() {
    let rest = spawn_rest().await;
    let kololo = rest.db.ids.campus_ref("Kololo");

    let classes = rest.get(KOLOLO_ADMIN, "/api/classes").await;
    assert_eq!(classes.status, StatusCode::OK, "{}", classes.body);
    assert_eq!(names(&classes.body["classes"]), ["S1 Gold", "S2 Red"]);
    assert_eq!(classes.body["total"], 2);
    for class in classes.body["classes"].as_array().unwrap() {
        assert_eq!(class["campus"], serde_json::to_value(&kololo).unwrap());
    }

    let created = rest
        .post(
            KOLOLO_ADMIN,
            "/api/departments",
            json!({ "name": "Sciences" }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let department: Department = serde_json::from_value(created.body).unwrap();
    assert_eq!(department.campus.as_ref(), Some(&kololo));
    let campus_id: Option<Uuid> =
        sqlx::query_scalar("SELECT campus_id FROM departments WHERE id = $1")
            .bind(department.id.as_uuid())
            .fetch_one(&rest.owner)
            .await
            .unwrap();
    assert_eq!(campus_id, Some(kololo.id.as_uuid()));
    let rows = rest.audit_rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].campus_id, Some(kololo.id.as_uuid()));
    assert_eq!(rows[0].actor_email, KOLOLO_ADMIN);

    // A campus-tied user cannot step into another campus with the header.
    let naalya = rest.db.ids.campus("Naalya");
    let request = rest
        .request(Method::GET, "/api/classes", Some(KOLOLO_ADMIN))
        .header("X-Rover-Campus", naalya.to_string())
        .body(Body::empty())
        .unwrap();
    let refused = rest.send(request).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert_eq!(refused.error().code, ErrorCode::PermissionDenied);

    // A school-wide user may pick a campus; a malformed one is 400, an unknown one 404.
    let request = rest
        .request(Method::GET, "/api/classes", Some(ADMIN))
        .header("X-Rover-Campus", kololo.id.to_string())
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        names(&rest.send(request).await.body["classes"]),
        ["S1 Gold", "S2 Red"]
    );
    let all = rest.get(ADMIN, "/api/classes").await;
    assert_eq!(names(&all.body["classes"]).len(), 4);
    let request = rest
        .request(Method::GET, "/api/classes", Some(ADMIN))
        .header("X-Rover-Campus", "kololo")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        rest.send(request).await.error().code,
        ErrorCode::InvalidRequest
    );
    let request = rest
        .request(Method::GET, "/api/classes", Some(ADMIN))
        .header("X-Rover-Campus", rest.db.ids.campus("Main").to_string())
        .body(Body::empty())
        .unwrap();
    let other_school = rest.send(request).await;
    assert_eq!(
        other_school.status,
        StatusCode::NOT_FOUND,
        "{}",
        other_school.body
    );
}

#[tokio::test]
async fn another_schools_ids_are_not_found_and_nothing_changes() {
    let rest = spawn_rest().await;
    let languages = rest.db.ids.department("Languages");

    let listed = rest.get(LAKESIDE_ADMIN, "/api/departments").await;
    assert_eq!(names(&listed.body), ["Sciences"]);

    let patched = rest
        .patch(
            LAKESIDE_ADMIN,
            &format!("/api/departments/{languages}"),
            json!({ "name": "Taken Over" }),
        )
        .await;
    assert_eq!(patched.status, StatusCode::NOT_FOUND, "{}", patched.body);
    assert_eq!(patched.error().code, ErrorCode::NotFound);
    assert_eq!(
        rest.department_name(languages.as_uuid()).await.as_deref(),
        Some("Languages")
    );
    assert_eq!(rest.count("audit_log").await, 0);

    // A student search in one school never finds another's students.
    let found = rest.get(LAKESIDE_ADMIN, "/api/students?query=Nakato").await;
    assert_eq!(found.status, StatusCode::OK);
    assert_eq!(found.body, json!([]));
}

#[tokio::test]
async fn requests_without_a_valid_token_are_401_json() {
    let rest = spawn_rest().await;
    let anonymous = rest
        .send(
            rest.request(Method::GET, "/api/departments", None)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(
        anonymous.status,
        StatusCode::UNAUTHORIZED,
        "{}",
        anonymous.body
    );
    assert_eq!(anonymous.error().code, ErrorCode::Unauthenticated);

    let forged = rest
        .send(
            Request::get("/api/staff")
                .header(header::HOST, "localhost")
                .header(header::AUTHORIZATION, "Bearer not.a.token")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED, "{}", forged.body);
    assert_eq!(forged.error().code, ErrorCode::Unauthenticated);

    // Authentication comes before the body is read, and nothing is written.
    let unauthenticated_write = rest
        .send(
            Request::post("/api/departments")
                .header(header::HOST, "localhost")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(r#"{"name":"Sciences","school_id":"x"}"#))
                .unwrap(),
        )
        .await;
    assert_eq!(unauthenticated_write.status, StatusCode::UNAUTHORIZED);
    assert_eq!(rest.count("audit_log").await, 0);
}

#[tokio::test]
async fn malformed_requests_are_400_and_duplicates_409_and_change_nothing() {
    let rest = spawn_rest().await;
    let departments = rest.count("departments").await;
    let expect = |reply: &Reply, status: StatusCode, code: ErrorCode| {
        assert_eq!(reply.status, status, "{}", reply.body);
        assert_eq!(reply.error().code, code, "{}", reply.body);
    };

    let broken = rest
        .json(Method::POST, ADMIN, "/api/departments", r#"{"name":"#)
        .await;
    expect(&broken, StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest);
    assert!(
        broken.error().message.contains("not valid JSON"),
        "{}",
        broken.body
    );

    // The tenant comes from the token, never from the body: a `school_id` field is refused.
    let smuggled = rest
        .post(
            ADMIN,
            "/api/departments",
            json!({ "name": "Sciences", "school_id": rest.db.ids.lakeside }),
        )
        .await;
    expect(
        &smuggled,
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidArguments,
    );
    assert!(
        smuggled
            .error()
            .message
            .contains("unknown field `school_id`"),
        "{}",
        smuggled.body
    );

    let missing = rest.post(ADMIN, "/api/departments", json!({})).await;
    expect(
        &missing,
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidArguments,
    );
    assert!(
        missing.error().message.contains("missing field `name`"),
        "{}",
        missing.body
    );

    let not_json = rest
        .send(
            rest.request(Method::POST, "/api/departments", Some(ADMIN))
                .body(Body::from(r#"{"name":"Sciences"}"#))
                .unwrap(),
        )
        .await;
    expect(
        &not_json,
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidRequest,
    );

    let empty = rest
        .post(ADMIN, "/api/departments", json!({ "name": "  " }))
        .await;
    expect(&empty, StatusCode::BAD_REQUEST, ErrorCode::InvalidArguments);

    let duplicate = rest
        .post(ADMIN, "/api/departments", json!({ "name": "languages" }))
        .await;
    expect(&duplicate, StatusCode::CONFLICT, ErrorCode::Conflict);
    assert_eq!(
        duplicate.error().message,
        "A school-wide department named \"languages\" already exists."
    );

    let mathematics = rest.db.ids.department("Mathematics");
    let path = format!("/api/departments/{mathematics}");
    let clash = rest
        .patch(ADMIN, &path, json!({ "name": "Languages" }))
        .await;
    expect(&clash, StatusCode::CONFLICT, ErrorCode::Conflict);
    let wrong_field = rest
        .patch(ADMIN, &path, json!({ "newName": "Maths" }))
        .await;
    expect(
        &wrong_field,
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidArguments,
    );
    let bad_id = rest
        .patch(
            ADMIN,
            "/api/departments/not-an-id",
            json!({ "name": "Maths" }),
        )
        .await;
    expect(&bad_id, StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest);
    let unknown_id = rest
        .patch(
            ADMIN,
            &format!("/api/departments/{}", Uuid::new_v4()),
            json!({ "name": "Maths" }),
        )
        .await;
    expect(&unknown_id, StatusCode::NOT_FOUND, ErrorCode::NotFound);

    let no_query = rest.get(ADMIN, "/api/students").await;
    expect(
        &no_query,
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidArguments,
    );
    assert!(
        no_query.error().message.contains("query"),
        "{}",
        no_query.body
    );
    let bad_class = rest
        .get(ADMIN, "/api/students?query=Nakato&classId=blue")
        .await;
    expect(
        &bad_class,
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidArguments,
    );
    let unknown_param = rest.get(ADMIN, "/api/staff?name=Okello").await;
    expect(
        &unknown_param,
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidArguments,
    );

    assert_eq!(rest.count("departments").await, departments);
    assert_eq!(rest.count("audit_log").await, 0);
    assert_eq!(
        rest.department_name(mathematics.as_uuid()).await.as_deref(),
        Some("Mathematics")
    );
}

#[tokio::test]
async fn students_and_staff_can_be_searched() {
    let rest = spawn_rest().await;
    let ids = &rest.db.ids;

    // Two Nakatos in the demo data: Nakato Mary (S2 Green) and Nakato Sarah (S1 Blue).
    let found = rest.get(ADMIN, "/api/students?query=nakato").await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    assert_eq!(names(&found.body), ["Nakato Mary", "Nakato Sarah"]);
    assert_eq!(found.body[0]["class"]["name"], "S2 Green");
    assert_eq!(found.body[1]["class"]["name"], "S1 Blue");
    let in_class = rest
        .get(
            ADMIN,
            &format!(
                "/api/students?query=nakato&classId={}",
                ids.class("S1 Blue")
            ),
        )
        .await;
    assert_eq!(names(&in_class.body), ["Nakato Sarah"]);
    let elsewhere = rest
        .get(
            ADMIN,
            &format!(
                "/api/students?query=nakato&classId={}",
                ids.class("S1 Gold")
            ),
        )
        .await;
    assert_eq!(elsewhere.body, json!([]));
    // A campus admin's search stays in their campus (Nakato Sarah is at Naalya).
    let kololo = rest.get(KOLOLO_ADMIN, "/api/students?query=nakato").await;
    assert_eq!(kololo.body, json!([]));
    let kololo = rest.get(KOLOLO_ADMIN, "/api/students?query=joan").await;
    assert_eq!(names(&kololo.body), ["Namatovu Joan"]);

    let everyone = rest.get(ADMIN, "/api/staff").await;
    assert_eq!(everyone.status, StatusCode::OK, "{}", everyone.body);
    assert_eq!(names(&everyone.body["staff"]).len(), 6);
    assert_eq!(everyone.body["total"], 6);
    assert_eq!(everyone.body["truncated"], false);
    let okello = rest.get(ADMIN, "/api/staff?query=okello").await;
    assert_eq!(names(&okello.body["staff"]), ["James Okello"]);
    assert_eq!(okello.body["staff"][0]["roles"], json!(["teacher"]));
}

#[tokio::test]
async fn tool_labels_lists_every_tool_with_its_label_without_a_token() {
    let rest = spawn_rest().await;
    let labels = rest
        .send(
            Request::get("/api/tool-labels")
                .header(header::HOST, "localhost")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(labels.status, StatusCode::OK);
    let labels = labels.body.as_object().expect("an object");
    assert_eq!(labels.len(), REGISTRY.len());
    for contract in REGISTRY {
        assert_eq!(
            labels.get(contract.name).and_then(Value::as_str),
            Some(contract.label),
            "{}",
            contract.name
        );
    }
    assert_eq!(labels["create_department"], "Creating a department…");
}

/// What an approval card's edit form is built from: every write that can wait for approval (the
/// RPC writes), with the very argument schema the model is shown; no read, no sandbox write.
#[tokio::test]
async fn tool_schemas_lists_every_rpc_write_with_its_argument_schema_without_a_token() {
    let rest = spawn_rest().await;
    let schemas = rest
        .send(
            Request::get("/api/tool-schemas")
                .header(header::HOST, "localhost")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(schemas.status, StatusCode::OK);
    let schemas = schemas.body.as_object().expect("an object");
    let writes: Vec<_> = REGISTRY
        .iter()
        .filter(|c| c.effect == rover_contracts::tools::Effect::Write && c.event().is_some())
        .collect();
    assert_eq!(schemas.len(), writes.len(), "{:?}", schemas.keys());
    for contract in writes {
        assert_eq!(
            schemas.get(contract.name),
            Some(&serde_json::to_value((contract.args_schema)()).unwrap()),
            "{}",
            contract.name
        );
    }
    assert!(!schemas.contains_key("list_departments") && !schemas.contains_key("write_file"));
    assert_eq!(schemas["create_department"]["required"], json!(["name"]));
}

#[tokio::test]
async fn the_openapi_document_is_3_1_and_describes_every_endpoint() {
    let rest = spawn_rest().await;
    let reply = rest
        .send(
            Request::get("/api/openapi.json")
                .header(header::HOST, "localhost")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let doc = reply.body;
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1."),
        "{}",
        doc["openapi"]
    );

    let operations = [
        ("/api/departments", "get", "list_departments"),
        ("/api/departments", "post", "create_department"),
        ("/api/departments/{id}", "patch", "rename_department"),
        ("/api/classes", "get", "list_classes"),
        ("/api/students", "get", "find_students"),
        ("/api/staff", "get", "list_staff"),
        ("/api/tool-labels", "get", "tool_labels"),
        ("/api/tool-schemas", "get", "tool_schemas"),
        ("/api/openapi.json", "get", "openapi"),
        ("/api/chats", "get", "list_chats"),
        ("/api/chats/export", "get", "export_chats"),
        ("/api/chats/{id}", "get", "read_chat"),
        ("/api/chats/{id}", "patch", "rename_chat"),
        ("/api/chats/{id}", "delete", "delete_chat"),
        (
            "/api/chats/{id}/messages/{messageId}/feedback",
            "post",
            "rate_reply",
        ),
        ("/api/staff/{id}/chats", "delete", "erase_staff_chats"),
        ("/api/approval-policy", "get", "read_approval_policy"),
        ("/api/approval-policy", "put", "replace_approval_policy"),
    ];
    let paths = doc["paths"].as_object().unwrap();
    let documented: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
    assert_eq!(documented, operations.len(), "{:?}", paths.keys());
    for (path, method, id) in operations {
        let operation = &doc["paths"][path][method];
        assert_eq!(operation["operationId"], id, "{method} {path}");
        assert!(
            operation["responses"]
                .as_object()
                .is_some_and(|r| !r.is_empty())
        );
    }
    // The tool endpoints: authenticated, with the documented error responses.
    let create = &doc["paths"]["/api/departments"]["post"];
    assert_eq!(create["x-rover-permission"], "create:Department");
    assert_eq!(create["x-rover-audit-event"], "create.department");
    for status in ["201", "400", "401", "403", "404", "409", "413"] {
        assert!(
            create["responses"].get(status).is_some(),
            "POST lacks {status}"
        );
    }
    assert_eq!(
        create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/CreateDepartmentArgs"
    );
    assert_eq!(doc["security"], json!([{ "bearer": [] }]));
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert_eq!(
        doc["paths"]["/api/tool-labels"]["get"]["security"],
        json!([])
    );
    // Schemas come from the contract types themselves.
    assert_eq!(
        doc["components"]["schemas"]["CreateDepartmentArgs"],
        rover_contracts::tools::schema_for::<CreateDepartmentArgs>().to_value()
    );
    let students = &doc["paths"]["/api/students"]["get"]["parameters"];
    let query = students
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "query")
        .expect("a query parameter");
    assert_eq!(
        (&query["in"], &query["required"]),
        (&json!("query"), &json!(true))
    );
    let error = &doc["components"]["schemas"]["Error"];
    assert_eq!(
        error["properties"]["error"]["required"],
        json!(["code", "message"])
    );

    // The history API: its schemas are the handlers' own types, and the erasure names its
    // permission and audit event.
    let erase = &doc["paths"]["/api/staff/{id}/chats"]["delete"];
    assert_eq!(erase["x-rover-permission"], "delete:Staff");
    assert_eq!(erase["x-rover-audit-event"], "erase.chats");
    let list = &doc["paths"]["/api/chats"]["get"]["parameters"];
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["cursor", "limit", "q"], "{list:#}");
    assert_eq!(
        doc["components"]["schemas"]["ChatDetail"]["properties"]["messages"]["type"],
        "array"
    );

    // Every reference resolves inside the document.
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(refs.len() > 20, "{refs:?}");
    for reference in refs {
        let pointer = reference.strip_prefix('#').expect("a local reference");
        assert!(doc.pointer(pointer).is_some(), "dangling {reference}");
    }
}

fn collect_refs(value: &Value, refs: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Value::String(reference)) => refs.push(reference.clone()),
                    _ => collect_refs(value, refs),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, refs)),
        _ => {}
    }
}

/// `tool-contracts.json` at the repository root is generated; regenerate it with
/// `ROVER_REGENERATE=1 cargo nextest run -p rover-gateway tool_contracts`.
#[test]
fn tool_contracts_json_is_in_sync() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(TOOL_CONTRACTS_FILE);
    let generated = tool_contracts_json();
    if std::env::var_os("ROVER_REGENERATE").is_some() {
        std::fs::write(&path, &generated).expect("write tool-contracts.json");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    // Compared as JSON, so the test does not depend on how serde_json orders object keys.
    let parse = |text: &str| serde_json::from_str::<Value>(text).ok();
    assert!(
        parse(&committed).is_some() && parse(&committed) == parse(&generated),
        "{} is out of date with the tool contracts; regenerate it with `{REGENERATE_COMMAND}`",
        path.display()
    );
    // It lists every contract, with the fields the Hub and the docs read.
    let contracts: Vec<Value> = serde_json::from_str(&committed).unwrap();
    assert_eq!(contracts.len(), REGISTRY.len());
    for (entry, contract) in contracts.iter().zip(REGISTRY) {
        assert_eq!(entry["name"], contract.name);
        assert_eq!(entry["label"], contract.label);
        assert_eq!(entry.get("event").and_then(Value::as_str), contract.event());
        for field in [
            "description",
            "owner",
            "effect",
            "posture",
            "argsSchema",
            "outputSchema",
        ] {
            assert!(
                entry.get(field).is_some(),
                "{} lacks {field}",
                contract.name
            );
        }
    }
    let create = &contracts[1];
    assert_eq!(
        create["posture"],
        json!({ "kind": "policy", "permission": "create:Department" })
    );
    assert_eq!(create["effect"], "write");
}

#[tokio::test]
async fn bodies_over_the_limit_are_413_and_write_nothing() {
    let rest = spawn_rest().await;
    let limit = rest.state.settings.http.body_limit_bytes;
    let big = format!(r#"{{"name":"{}"}}"#, "x".repeat(limit));
    let post = || {
        rest.request(Method::POST, "/api/departments", Some(ADMIN))
            .header(header::CONTENT_TYPE, "application/json")
    };
    // Announced by Content-Length: refused before the handler runs.
    let announced = post()
        .header(header::CONTENT_LENGTH, big.len())
        .body(Body::from(big.clone()))
        .unwrap();
    let response = rest.router.clone().oneshot(announced).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Streamed without a length: the body extractor hits the limit and answers with the error body.
    let chunks = vec![Ok::<_, std::io::Error>(big)];
    let streamed = post()
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap();
    let streamed = rest.send(streamed).await;
    assert_eq!(streamed.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(streamed.error().code, ErrorCode::TooLarge);
    assert_eq!(rest.count("audit_log").await, 0);
}

//! The chat history API in-process (`/api/chats`): listing (order, keyset pages, titles, statuses,
//! campus scope), full-text search on its indexes, reading back, renaming, deleting (everything a
//! chat owns, usage kept, audited, a queued turn unable to recreate it), export, feedback, an
//! admin's erasure — across two schools, two users of one school and a campus-scoped admin, each
//! attack answered exactly as an unknown id. No worker runs: turns are opened by real chat POSTs
//! and their events recorded as the worker records them.

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use rover_contracts::context::Subagent;
use rover_contracts::ids::{ThreadId, TurnId};
use rover_contracts::wire::{FinishReason, TurnEvent, TurnEventKind};
use serde_json::{Value, json};
use tower::ServiceExt as _;
use uuid::Uuid;

use crate::rest::{ADMIN, Reply, Rest, spawn_rest, spawn_rest_with};

const COLLEAGUE: &str = "dos@hill.school";
const TEACHER: &str = "amina@hill.school";
const KOLOLO_ADMIN: &str = "kololo.admin@hill.school";
const LAKESIDE_ADMIN: &str = "admin@lakeside.college";

/// Sends `text` on chat `chat` as `email` (in `campus`, if named), as `useChat` does; the stream is
/// dropped at once. Returns the status.
async fn say(rest: &Rest, email: &str, chat: &str, text: &str, campus: Option<Uuid>) -> StatusCode {
    let body = json!({ "id": chat, "messages": [
        { "id": format!("u-{chat}-{}", Uuid::new_v4().simple()), "role": "user",
          "parts": [{ "type": "text", "text": text }] },
    ] });
    let mut request = rest
        .request(Method::POST, "/api/chat", Some(email))
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(campus) = campus {
        request = request.header("x-rover-campus", campus.to_string());
    }
    let reply = rest
        .send_raw(request.body(Body::from(body.to_string())).unwrap())
        .await;
    reply.0
}

/// `say`, then the turn closed as a worker closes it; the turn's id.
async fn said(rest: &Rest, email: &str, chat: &str, text: &str) -> TurnId {
    assert_eq!(say(rest, email, chat, text, None).await, StatusCode::OK);
    let turn = last_turn(rest, email, chat).await;
    rest.finish_turns_of(email).await;
    turn
}

/// The thread of `email`'s chat id, as the gateway derives it.
fn thread(rest: &Rest, email: &str, chat: &str) -> Uuid {
    const NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2a4e_9b7d_4c3a_8e21_5d0f_7a9b_c3e1);
    Uuid::new_v5(
        &NAMESPACE,
        format!("{}/{chat}", rest.db.ids.user(email)).as_bytes(),
    )
}

async fn last_turn(rest: &Rest, email: &str, chat: &str) -> TurnId {
    let turn: Uuid = sqlx::query_scalar("SELECT last_turn_id FROM threads WHERE id = $1")
        .bind(thread(rest, email, chat))
        .fetch_one(&rest.owner)
        .await
        .expect("the chat has a turn");
    TurnId::from_uuid(turn)
}

/// Records `turn`'s events as the worker does: a reply `text` in message `message`.
async fn reply(rest: &Rest, email: &str, chat: &str, turn: TurnId, message: &str, text: &str) {
    let kinds: Vec<(Option<Subagent>, TurnEventKind)> = [
        TurnEventKind::Start {
            message_id: message.to_owned(),
            trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned()),
        },
        TurnEventKind::StartStep,
        TurnEventKind::TextStart { id: "t".into() },
        TurnEventKind::TextDelta {
            id: "t".into(),
            delta: text.to_owned(),
        },
        TurnEventKind::TextEnd { id: "t".into() },
        TurnEventKind::FinishStep,
        TurnEventKind::Finish {
            reason: FinishReason::Stop,
            usage: None,
            model: None,
        },
    ]
    .into_iter()
    .map(|kind| (None, kind))
    .collect();
    record(rest, email, chat, turn, kinds, text).await;
}

/// Records `turn`'s `kinds` of event (each by Rover or a subagent) as the worker does, and
/// `text` as the reply the model read.
async fn record(
    rest: &Rest,
    email: &str,
    chat: &str,
    turn: TurnId,
    kinds: Vec<(Option<Subagent>, TurnEventKind)>,
    text: &str,
) {
    let events: Vec<(i32, Value)> = kinds
        .into_iter()
        .enumerate()
        .map(|(seq, (subagent, event))| {
            let event = TurnEvent {
                turn_id: turn,
                seq: seq as u64,
                subagent,
                event,
            };
            (seq as i32, serde_json::to_value(event).unwrap())
        })
        .collect();
    let school = rover_domain::actor::user_school(&rest.db.pool, rest.db.ids.user(email))
        .await
        .unwrap()
        .unwrap();
    let mut tx = rover_domain::begin_tenant(&rest.db.pool, school)
        .await
        .unwrap();
    let thread = ThreadId::from_uuid(thread(rest, email, chat));
    rover_turnstore::events::record_events(&mut tx, thread, turn, &events)
        .await
        .unwrap();
    rover_turnstore::conversation_log::append(
        &mut tx,
        thread,
        turn,
        &[json!({ "role": "assistant", "content": text })],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

fn ids(list: &Reply) -> Vec<&str> {
    list.body["chats"]
        .as_array()
        .unwrap_or_else(|| panic!("{:?}", list.body))
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect()
}

async fn delete(rest: &Rest, email: &str, path: &str) -> Reply {
    rest.send(
        rest.request(Method::DELETE, path, Some(email))
            .body(Body::empty())
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn chats_are_listed_newest_first_in_keyset_pages_with_titles_and_statuses() {
    let rest = spawn_rest().await;
    said(&rest, ADMIN, "first", "How many students do we have?").await;
    said(
        &rest,
        ADMIN,
        "second",
        "Please record attendance for S1 Blue today: everyone present except Nakato",
    )
    .await;
    // The third is still running (no worker takes it).
    assert_eq!(
        say(&rest, ADMIN, "third", "List the departments", None).await,
        StatusCode::OK
    );
    // A colleague's and another school's chats are not the admin's.
    said(&rest, COLLEAGUE, "first", "Colleague's chat").await;
    said(&rest, LAKESIDE_ADMIN, "first", "Lakeside's chat").await;

    let all = rest.get(ADMIN, "/api/chats").await;
    assert_eq!(all.status, StatusCode::OK, "{:?}", all.body);
    assert_eq!(ids(&all), ["third", "second", "first"]);
    let chats = all.body["chats"].as_array().unwrap();
    assert_eq!(chats[0]["status"], "running");
    assert_eq!(chats[0]["title"], "List the departments");
    assert_eq!(
        chats[1]["title"],
        "Please record attendance for S1 Blue today: everyone…"
    );
    assert_eq!(chats[2]["status"], "idle");
    assert!(all.body["nextCursor"].is_null());

    // Keyset pages: every chat once, in order.
    let page = rest.get(ADMIN, "/api/chats?limit=2").await;
    assert_eq!(ids(&page), ["third", "second"]);
    let cursor = page.body["nextCursor"].as_str().expect("a next page");
    // A chat of the first page that moves to the top meanwhile neither repeats on the next page
    // nor pushes another off it.
    rest.finish_turns_of(ADMIN).await;
    said(&rest, ADMIN, "second", "And the teachers?").await;
    let next = rest
        .get(ADMIN, &format!("/api/chats?limit=2&cursor={cursor}"))
        .await;
    assert_eq!(ids(&next), ["first"]);
    assert!(next.body["nextCursor"].is_null());
    assert_eq!(
        ids(&rest.get(ADMIN, "/api/chats").await),
        ["second", "third", "first"]
    );

    // Waiting on the staff member: an approval, or an `ask_user` question.
    let second = thread(&rest, ADMIN, "second");
    sqlx::query(
        "INSERT INTO approvals (school_id, approval_id, thread_id, root_turn_id, turn_id, chain, \
         call_id, tool, input, user_id) \
         SELECT school_id, gen_random_uuid(), id, gen_random_uuid(), gen_random_uuid(), '{}', \
         'call-1', 'record_attendance', '{}', user_id FROM threads WHERE id = $1",
    )
    .bind(second)
    .execute(&rest.owner)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO conversation_log (school_id, thread_id, turn_id, message) \
         SELECT school_id, id, last_turn_id, $2 FROM threads WHERE id = $1",
    )
    .bind(thread(&rest, ADMIN, "third"))
    .bind(
        json!({ "role": "assistant", "content": null, "tool_calls": [{ "id": "q1",
        "type": "function", "function": { "name": "ask_user", "arguments": "{}" } }] }),
    )
    .execute(&rest.owner)
    .await
    .unwrap();
    let statuses: Vec<(String, String)> = rest.get(ADMIN, "/api/chats").await.body["chats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("second".to_owned(), "awaiting_approval".to_owned()),
            ("third".to_owned(), "awaiting_answer".to_owned()),
            ("first".to_owned(), "idle".to_owned()),
        ]
    );

    // Each caller lists only their own.
    assert_eq!(ids(&rest.get(COLLEAGUE, "/api/chats").await), ["first"]);
    assert_eq!(
        ids(&rest.get(LAKESIDE_ADMIN, "/api/chats").await),
        ["first"]
    );
    assert_eq!(
        ids(&rest.get(TEACHER, "/api/chats").await),
        Vec::<&str>::new()
    );

    // Bad pages are 400s.
    for bad in [
        "limit=0",
        "limit=101",
        "limit=x",
        "cursor=nope",
        "q=%01",
        "unknown=1",
    ] {
        let reply = rest.get(ADMIN, &format!("/api/chats?{bad}")).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {:?}",
            reply.body
        );
        reply.error();
    }
}

#[tokio::test]
async fn search_matches_titles_and_message_text_on_full_text_indexes() {
    let rest = spawn_rest().await;
    let turn = said(&rest, ADMIN, "physics", "Who teaches in S2 Red?").await;
    reply(
        &rest,
        ADMIN,
        "physics",
        turn,
        "msg-p",
        "Okello teaches Physics to S2 Red.",
    )
    .await;
    said(&rest, ADMIN, "budget", "List the departments").await;
    let renamed = rest
        .patch(
            ADMIN,
            "/api/chats/budget",
            json!({ "title": "  Budget   planning " }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{:?}", renamed.body);
    assert_eq!(renamed.body["title"], "Budget planning");
    // A tool result's text is the school's records, not the conversation: not searched.
    sqlx::query(
        "INSERT INTO conversation_log (school_id, thread_id, turn_id, message) \
         SELECT school_id, id, last_turn_id, $2 FROM threads WHERE id = $1",
    )
    .bind(thread(&rest, ADMIN, "budget"))
    .bind(json!({ "role": "tool", "tool_call_id": "c", "content": "Nakato Sarah" }))
    .execute(&rest.owner)
    .await
    .unwrap();

    let search = |q: &'static str| {
        let rest = &rest;
        async move {
            ids(&rest.get(ADMIN, &format!("/api/chats?q={q}")).await)
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(search("physics").await, ["physics"], "assistant text");
    assert_eq!(search("teach").await, ["physics"], "stemmed: teaches");
    assert_eq!(search("S2%20Red").await, ["physics"], "user text");
    assert_eq!(search("budget").await, ["budget"], "the title");
    assert_eq!(search("nakato").await, Vec::<String>::new(), "tool results");
    assert_eq!(search("%22red%20budget%22").await, Vec::<String>::new());
    // A colleague's search never reaches the admin's chats.
    assert!(ids(&rest.get(COLLEAGUE, "/api/chats?q=physics").await).is_empty());

    // The plan, on a school with thousands of chats and messages (and another school's): both
    // full-text indexes, no scan of either table.
    sqlx::query(
        "WITH t AS (INSERT INTO threads (id, school_id, user_id, chat_id, title) \
           SELECT gen_random_uuid(), u.school_id, u.id, 'bulk-' || n, 'Chat number ' || n \
           FROM users u, generate_series(1, 1000) n RETURNING id, school_id, user_id) \
         INSERT INTO conversation_log (school_id, thread_id, turn_id, message) \
         SELECT t.school_id, t.id, gen_random_uuid(), \
           jsonb_build_object('role', 'user', 'content', 'About attendance, message ' || n) \
         FROM t, generate_series(1, 2) n",
    )
    .execute(&rest.owner)
    .await
    .unwrap();
    sqlx::query("ANALYZE threads, conversation_log")
        .execute(&rest.owner)
        .await
        .unwrap();
    assert_eq!(search("physics").await, ["physics"]);
    // The search itself (`rover_search_threads`, which runs past row-level security because under
    // it the planner may not use a full-text index) as its owner runs it, in the admin's school.
    let body: String =
        sqlx::query_scalar("SELECT prosrc FROM pg_proc WHERE proname = 'rover_search_threads'")
            .fetch_one(&rest.owner)
            .await
            .unwrap();
    let mut owner = rest.owner.acquire().await.unwrap();
    sqlx::raw_sql(&format!("SET app.school_id = '{}'", rest.db.ids.hill))
        .execute(&mut *owner)
        .await
        .unwrap();
    sqlx::raw_sql(&format!("PREPARE search(uuid, text) AS {body}"))
        .execute(&mut *owner)
        .await
        .unwrap();
    let plan: Vec<String> = sqlx::raw_sql(&format!(
        "EXPLAIN EXECUTE search('{}', 'physics')",
        rest.db.ids.user(ADMIN)
    ))
    .fetch_all(&mut *owner)
    .await
    .unwrap()
    .iter()
    .map(|row| sqlx::Row::get(row, 0))
    .collect();
    sqlx::raw_sql("DEALLOCATE search; RESET app.school_id")
        .execute(&mut *owner)
        .await
        .unwrap();
    let plan = plan.join("\n");
    for index in ["threads_title_search_idx", "conversation_log_search_idx"] {
        assert!(
            plan.contains(&format!("Bitmap Index Scan on {index}")),
            "{index} is not used:\n{plan}"
        );
    }
    assert!(!plan.contains("Seq Scan"), "{plan}");
    // And the list around it reads the user's threads by index.
    let mut tx = rover_domain::begin_tenant(&rest.db.pool, rest.db.ids.hill)
        .await
        .unwrap();
    let query = rover_turnstore::chats::ListQuery {
        limit: 20,
        search: Some("physics".to_owned()),
        ..Default::default()
    };
    let plan: Vec<String> = sqlx::query_scalar(&format!(
        "EXPLAIN {}",
        rover_turnstore::chats::list_sql(&query)
    ))
    .bind(rest.db.ids.user(ADMIN).as_uuid())
    .bind(None::<Uuid>)
    .bind(None::<chrono::DateTime<chrono::Utc>>)
    .bind(None::<Uuid>)
    .bind(21_i64)
    .bind("physics")
    .fetch_all(tx.connection())
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    let plan = plan.join("\n");
    assert!(!plan.contains("Seq Scan"), "{plan}");
    assert!(plan.contains("rover_search_threads"), "{plan}");
}

#[tokio::test]
async fn a_campus_scoped_caller_lists_the_chats_of_their_campus() {
    let rest = spawn_rest().await;
    let naalya = rest.db.ids.campus("Naalya").as_uuid();
    let kololo = rest.db.ids.campus("Kololo").as_uuid();
    assert_eq!(
        say(&rest, ADMIN, "in-naalya", "List the classes", Some(naalya)).await,
        StatusCode::OK
    );
    rest.finish_turns_of(ADMIN).await;
    said(&rest, ADMIN, "school-wide", "List the departments").await;
    said(&rest, KOLOLO_ADMIN, "kololo", "List the classes").await;

    let in_campus = |email: &'static str, campus: Uuid| {
        let rest = &rest;
        async move {
            rest.send(
                rest.request(Method::GET, "/api/chats", Some(email))
                    .header("x-rover-campus", campus.to_string())
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
        }
    };
    assert_eq!(ids(&in_campus(ADMIN, naalya).await), ["in-naalya"]);
    assert!(ids(&in_campus(ADMIN, kololo).await).is_empty());
    assert_eq!(
        ids(&rest.get(ADMIN, "/api/chats").await),
        ["school-wide", "in-naalya"]
    );
    // A campus-tied admin is always in their campus, and sees only their own chats.
    assert_eq!(ids(&rest.get(KOLOLO_ADMIN, "/api/chats").await), ["kololo"]);
    let elsewhere = in_campus(KOLOLO_ADMIN, naalya).await;
    assert_eq!(
        elsewhere.status,
        StatusCode::FORBIDDEN,
        "{:?}",
        elsewhere.body
    );
}

#[tokio::test]
async fn a_chat_reads_back_and_a_colleagues_or_another_schools_answers_as_unknown() {
    let rest = spawn_rest().await;
    let turn = said(&rest, ADMIN, "mine", "How many students do we have?").await;
    reply(
        &rest,
        ADMIN,
        "mine",
        turn,
        "msg-1",
        "There are 12 students.",
    )
    .await;

    let read = rest.get(ADMIN, "/api/chats/mine").await;
    assert_eq!(read.status, StatusCode::OK, "{:?}", read.body);
    assert_eq!(read.body["id"], "mine");
    let messages = read.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(
        messages[0]["parts"],
        json!([{ "type": "text", "text": "How many students do we have?" }])
    );
    assert_eq!(
        messages[1],
        json!({ "id": "msg-1", "role": "assistant",
            "metadata": { "turnId": turn, "traceId": "4bf92f3577b34da6a3ce929d0e0e4736" },
            "parts": [{ "type": "step-start" },
                { "type": "text", "text": "There are 12 students.", "state": "done" }] })
    );

    let unknown = rest.get(ADMIN, "/api/chats/never-used").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let attacks: [(&str, Method, &str, Option<Value>); 5] = [
        ("read", Method::GET, "/api/chats/mine", None),
        (
            "rename",
            Method::PATCH,
            "/api/chats/mine",
            Some(json!({ "title": "Mine now" })),
        ),
        (
            "feedback",
            Method::POST,
            "/api/chats/mine/messages/msg-1/feedback",
            Some(json!({ "rating": "down" })),
        ),
        ("delete", Method::DELETE, "/api/chats/mine", None),
        ("stop", Method::POST, "/api/chat/mine/stop", None),
    ];
    for attacker in [COLLEAGUE, LAKESIDE_ADMIN, KOLOLO_ADMIN] {
        for (what, method, path, body) in &attacks {
            let reply = match body {
                Some(body) => {
                    rest.json(method.clone(), attacker, path, &body.to_string())
                        .await
                }
                None => {
                    rest.send(
                        rest.request(method.clone(), path, Some(attacker))
                            .body(Body::empty())
                            .unwrap(),
                    )
                    .await
                }
            };
            // A stop of a chat the caller never had answers 204, as for any idle id.
            if *what == "stop" {
                assert_eq!(reply.status, StatusCode::NO_CONTENT, "{attacker} {what}");
                continue;
            }
            assert_eq!(reply.status, StatusCode::NOT_FOUND, "{attacker} {what}");
            assert_eq!(reply.body, unknown.body, "{attacker} {what}");
        }
    }
    // Nothing of the admin's chat changed.
    let again = rest.get(ADMIN, "/api/chats/mine").await;
    assert_eq!(again.body, read.body);
    assert_eq!(rest.count("chat_feedback").await, 0);

    // Malformed ids and bodies are 400s.
    assert_eq!(
        rest.get(ADMIN, "/api/chats/bad%20id").await.status,
        StatusCode::BAD_REQUEST
    );
    for body in [
        json!({ "title": "" }),
        json!({ "title": "x".repeat(201) }),
        json!({ "name": "x" }),
    ] {
        let reply = rest.patch(ADMIN, "/api/chats/mine", body.clone()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        reply.error();
    }
}

#[tokio::test]
async fn deleting_a_chat_stops_its_reply_removes_all_it_owns_keeps_usage_and_is_audited() {
    let rest = spawn_rest_with(|settings| settings.chat.stop_wait_ms = 50).await;
    let turn = said(&rest, ADMIN, "doomed", "How many students do we have?").await;
    reply(
        &rest,
        ADMIN,
        "doomed",
        turn,
        "msg-d",
        "There are 12 students.",
    )
    .await;
    rest.post(
        ADMIN,
        "/api/chats/doomed/messages/msg-d/feedback",
        json!({ "rating": "up" }),
    )
    .await;
    sqlx::query(
        "INSERT INTO token_usage (school_id, turn_id, user_id, day, input_tokens, output_tokens) \
         VALUES ($1, $2, $3, current_date, 100, 20)",
    )
    .bind(rest.db.ids.hill.as_uuid())
    .bind(turn.as_uuid())
    .bind(rest.db.ids.user(ADMIN).as_uuid())
    .execute(&rest.owner)
    .await
    .unwrap();
    said(&rest, ADMIN, "kept", "List the departments").await;
    // A reply is running when the chat is deleted.
    assert_eq!(
        say(&rest, ADMIN, "doomed", "And the teachers?", None).await,
        StatusCode::OK
    );

    let doomed = thread(&rest, ADMIN, "doomed");
    let owned = |table: &'static str| {
        let rest = &rest;
        async move {
            sqlx::query_scalar::<_, i64>(&format!(
                "SELECT count(*) FROM {table} WHERE thread_id = $1"
            ))
            .bind(doomed)
            .fetch_one(&rest.owner)
            .await
            .unwrap()
        }
    };
    for table in [
        "conversation_log",
        "turn_events",
        "chat_turns",
        "chat_feedback",
        "open_turns",
    ] {
        assert!(owned(table).await > 0, "{table} has nothing to delete");
    }

    let deleted = delete(&rest, ADMIN, "/api/chats/doomed").await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{:?}", deleted.body);
    for table in [
        "conversation_log",
        "turn_events",
        "turn_steps",
        "chat_turns",
        "chat_feedback",
        "open_turns",
        "approvals",
        "artifacts",
    ] {
        assert_eq!(owned(table).await, 0, "{table} kept rows of a deleted chat");
    }
    assert_eq!(
        rest.get(ADMIN, "/api/chats/doomed").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(ids(&rest.get(ADMIN, "/api/chats").await), ["kept"]);
    // Usage totals stay (they carry no content).
    assert_eq!(rest.count("token_usage").await, 1);
    // Audited: who, which thread, how many turns — no content.
    let audit: (String, String, Value) = sqlx::query_as(
        "SELECT event, subject_id, before FROM audit_log WHERE event = 'delete.chat'",
    )
    .fetch_one(&rest.owner)
    .await
    .unwrap();
    assert_eq!(
        audit,
        (
            "delete.chat".to_owned(),
            doomed.to_string(),
            json!({ "turns": 2 })
        )
    );
    // Deleting again is the unknown chat's 404.
    assert_eq!(
        delete(&rest, ADMIN, "/api/chats/doomed").await.status,
        StatusCode::NOT_FOUND
    );

    // A turn of the deleted chat still queued cannot recreate it: the worker finds it gone.
    let mut tx = rover_domain::begin_tenant(&rest.db.pool, rest.db.ids.hill)
        .await
        .unwrap();
    let recreated = rover_turnstore::threads::ensure_thread(
        &mut tx,
        ThreadId::from_uuid(doomed),
        rest.db.ids.user(ADMIN),
    )
    .await;
    assert!(
        matches!(recreated, Err(rover_domain::DomainError::NotFound(_))),
        "{recreated:?}"
    );
    tx.rollback().await.unwrap();
    // The staff member's new message on the same id opens it afresh, empty.
    said(&rest, ADMIN, "doomed", "Start again").await;
    let fresh = rest.get(ADMIN, "/api/chats/doomed").await;
    assert_eq!(fresh.body["messages"].as_array().unwrap().len(), 1);
    assert_eq!(fresh.body["title"], "Start again");
}

#[tokio::test]
async fn feedback_is_kept_with_the_turn_and_its_trace() {
    let rest = spawn_rest().await;
    let turn = said(&rest, ADMIN, "rated", "How many students do we have?").await;
    reply(
        &rest,
        ADMIN,
        "rated",
        turn,
        "msg-r",
        "There are 12 students.",
    )
    .await;
    let path = "/api/chats/rated/messages/msg-r/feedback";
    let up = rest
        .post(ADMIN, path, json!({ "rating": "up", "comment": "Right" }))
        .await;
    assert_eq!(up.status, StatusCode::NO_CONTENT, "{:?}", up.body);
    let down = rest
        .post(
            ADMIN,
            path,
            json!({ "rating": "down", "comment": " Wrong count " }),
        )
        .await;
    assert_eq!(down.status, StatusCode::NO_CONTENT);
    let kept: Vec<(Uuid, String, Option<String>, Option<String>)> =
        sqlx::query_as("SELECT turn_id, rating, comment, trace_id FROM chat_feedback")
            .fetch_all(&rest.owner)
            .await
            .unwrap();
    assert_eq!(
        kept,
        [(
            turn.as_uuid(),
            "down".to_owned(),
            Some("Wrong count".to_owned()),
            Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned())
        )]
    );
    // The chat reads back with the caller's rating (the latest), for the Hub to show.
    assert_eq!(
        rest.get(ADMIN, "/api/chats/rated").await.body["feedback"],
        json!({ "msg-r": { "rating": "down", "comment": "Wrong count" } })
    );
    let no_reply = rest
        .post(
            ADMIN,
            "/api/chats/rated/messages/msg-none/feedback",
            json!({ "rating": "up" }),
        )
        .await;
    assert_eq!(no_reply.status, StatusCode::NOT_FOUND);
    for body in [
        json!({ "rating": "meh" }),
        json!({ "rating": "up", "comment": "x".repeat(2001) }),
        json!({ "rating": "up", "extra": 1 }),
        json!({}),
    ] {
        let reply = rest.post(ADMIN, path, body.clone()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
    }
}

#[tokio::test]
async fn a_staff_member_exports_all_their_chats() {
    let rest = spawn_rest().await;
    let turn = said(&rest, ADMIN, "one", "How many students do we have?").await;
    reply(&rest, ADMIN, "one", turn, "msg-1", "There are 12 students.").await;
    said(&rest, ADMIN, "two", "List the departments").await;
    said(&rest, COLLEAGUE, "three", "Not the admin's").await;
    let response = rest
        .router
        .clone()
        .oneshot(
            rest.request(Method::GET, "/api/chats/export", Some(ADMIN))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );
    let export: Value = serde_json::from_slice(
        &axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(export["userId"], json!(rest.db.ids.user(ADMIN)));
    let chats = export["chats"].as_array().unwrap();
    let chat_ids: Vec<&str> = chats.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(chat_ids, ["one", "two"]);
    assert_eq!(
        chats[0]["messages"],
        rest.get(ADMIN, "/api/chats/one").await.body["messages"]
    );
}

#[tokio::test]
async fn a_school_admin_erases_one_staff_members_chats_within_their_scope() {
    let rest = spawn_rest().await;
    said(&rest, TEACHER, "a", "List my classes").await;
    said(&rest, TEACHER, "b", "Who is absent?").await;
    said(&rest, COLLEAGUE, "c", "Not erased").await;
    let teacher = rest.db.ids.user(TEACHER);
    let path = format!("/api/staff/{teacher}/chats");

    // Who may not: a campus admin, a teacher, another school's admin (who cannot see the user).
    for (who, status) in [
        (KOLOLO_ADMIN, StatusCode::FORBIDDEN),
        (TEACHER, StatusCode::FORBIDDEN),
        (LAKESIDE_ADMIN, StatusCode::NOT_FOUND),
    ] {
        let reply = delete(&rest, who, &path).await;
        assert_eq!(reply.status, status, "{who}: {:?}", reply.body);
        reply.error();
    }
    // A school admin acting in Kololo cannot reach a Naalya teacher.
    let kololo = rest.db.ids.campus("Kololo").as_uuid();
    let scoped = rest
        .send(
            rest.request(Method::DELETE, &path, Some(ADMIN))
                .header("x-rover-campus", kololo.to_string())
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(scoped.status, StatusCode::NOT_FOUND, "{:?}", scoped.body);
    assert_eq!(ids(&rest.get(TEACHER, "/api/chats").await).len(), 2);

    let erased = delete(&rest, ADMIN, &path).await;
    assert_eq!(erased.status, StatusCode::OK, "{:?}", erased.body);
    assert_eq!(erased.body, json!({ "erased": 2 }));
    assert!(ids(&rest.get(TEACHER, "/api/chats").await).is_empty());
    assert_eq!(ids(&rest.get(COLLEAGUE, "/api/chats").await), ["c"]);
    let audit: (String, String, Value) = sqlx::query_as(
        "SELECT event, subject_id, before FROM audit_log WHERE event = 'erase.chats'",
    )
    .fetch_one(&rest.owner)
    .await
    .unwrap();
    assert_eq!(
        audit,
        (
            "erase.chats".to_owned(),
            teacher.to_string(),
            json!({ "chats": 2 })
        )
    );
    let unknown = delete(
        &rest,
        ADMIN,
        &format!("/api/staff/{}/chats", Uuid::new_v4()),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

/// Arbitrary text for a query value, a path segment or a JSON string: printable, hostile
/// (quotes, `%`, control characters, tsquery operators, SQL) and over-long.
fn hostile_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        any::<String>(),
        "[ -~]{0,40}",
        Just("' OR 1=1 --".to_owned()),
        Just("a & | ! <-> (".to_owned()),
        Just("%00%ff%".to_owned()),
        Just("x".repeat(300)),
        Just(String::new()),
        Just("nul\0".to_owned()),
        Just("\u{202E}\u{200B}\u{1b}[2J\r".to_owned()),
        Just("export".to_owned()),
    ]
}

/// Arbitrary JSON shaped a little like the history API's bodies.
fn any_body() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        hostile_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("title".to_owned()),
                    Just("rating".to_owned()),
                    Just("comment".to_owned()),
                    ".{0,8}".prop_map(String::from),
                ],
                inner,
                0..4
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The history API fed arbitrary query strings, ids and bodies by a colleague of the chat's owner:
/// never a 5xx, every refusal the JSON error shape, and nothing of the owner's changes.
#[tokio::test]
async fn the_history_api_survives_arbitrary_input_from_a_colleague() {
    use proptest::strategy::{Strategy, ValueTree};
    let rest = spawn_rest().await;
    let turn = said(&rest, ADMIN, "target", "How many students do we have?").await;
    reply(
        &rest,
        ADMIN,
        "target",
        turn,
        "msg-t",
        "There are 12 students.",
    )
    .await;
    let before = rest.get(ADMIN, "/api/chats/target").await.body;

    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let inputs = (
        hostile_text(),
        hostile_text(),
        proptest::arbitrary::any::<u32>(),
        any_body(),
    );
    for _ in 0..96 {
        let (raw, id, number, body) = inputs.new_tree(&mut runner).unwrap().current();
        let (text, id) = (encoded(&raw), encoded(&id));
        // A cursor time anywhere in i64, far past and far future included.
        let at = (i64::from(number) << 31) * if number % 2 == 0 { 1 } else { -1 };
        let requests = [
            (
                Method::GET,
                format!("/api/chats?q={text}&limit={number}"),
                None,
            ),
            (Method::GET, format!("/api/chats?cursor={text}"), None),
            (
                Method::GET,
                format!("/api/chats?cursor={at}.{}", Uuid::new_v4().simple()),
                None,
            ),
            (
                Method::PATCH,
                "/api/chats/target".to_owned(),
                Some(json!({ "title": raw })),
            ),
            (
                Method::POST,
                "/api/chats/target/messages/msg-t/feedback".to_owned(),
                Some(json!({ "rating": "down", "comment": raw })),
            ),
            (Method::GET, format!("/api/chats/{id}"), None),
            (
                Method::PATCH,
                format!("/api/chats/{id}"),
                Some(body.clone()),
            ),
            (
                Method::PATCH,
                "/api/chats/target".to_owned(),
                Some(json!({ "title": text })),
            ),
            (
                Method::POST,
                format!("/api/chats/target/messages/{id}/feedback"),
                Some(body.clone()),
            ),
            (
                Method::POST,
                "/api/chats/target/messages/msg-t/feedback".to_owned(),
                Some(json!({ "rating": text, "comment": id })),
            ),
            (Method::DELETE, format!("/api/chats/{id}"), None),
            (Method::DELETE, format!("/api/staff/{id}/chats"), None),
        ];
        for (method, path, body) in requests {
            let mut request = rest.request(method.clone(), &path, Some(COLLEAGUE));
            let body = match body {
                Some(body) => {
                    request = request.header(header::CONTENT_TYPE, "application/json");
                    Body::from(body.to_string())
                }
                None => Body::empty(),
            };
            let Ok(request) = request.body(body) else {
                continue; // not even a valid HTTP request
            };
            let reply = rest.send(request).await;
            assert!(
                !reply.status.is_server_error(),
                "{method} {path}: {} {:?}",
                reply.status,
                reply.body
            );
            if !reply.status.is_success() {
                reply.error();
            }
        }
    }
    assert_eq!(rest.get(ADMIN, "/api/chats/target").await.body, before);
    assert_eq!(rest.count("chat_feedback").await, 0);
    assert_eq!(
        ids(&rest.get(ADMIN, "/api/chats").await),
        ["target"],
        "the owner's chat is untouched"
    );
}

/// A list cursor whose time is out of range is refused (400), not a 500: far in the past or the
/// future Postgres cannot compare it. As the owner and as a colleague.
#[tokio::test]
async fn a_cursor_out_of_range_is_refused() {
    let rest = spawn_rest().await;
    for n in 0..3 {
        said(
            &rest,
            ADMIN,
            &format!("c{n}"),
            "How many students do we have?",
        )
        .await;
    }
    let page = rest.get(ADMIN, "/api/chats?limit=2").await;
    let next = page.body["nextCursor"].as_str().expect("a next page");
    let thread = next.split_once('.').unwrap().1;
    assert_eq!(
        ids(&rest.get(ADMIN, &format!("/api/chats?cursor={next}")).await).len(),
        1
    );
    for who in [ADMIN, COLLEAGUE, LAKESIDE_ADMIN] {
        for at in [
            "-300000000000000000",
            "-1",
            "253402300800000000",
            "9223372036854775807",
            "-9223372036854775808",
        ] {
            let reply = rest
                .get(who, &format!("/api/chats?cursor={at}.{thread}"))
                .await;
            assert_eq!(
                reply.status,
                StatusCode::BAD_REQUEST,
                "{who} {at}: {:?}",
                reply.body
            );
            assert_eq!(
                reply.body["error"]["code"], "invalid_arguments",
                "{:?}",
                reply.body
            );
        }
    }
}

/// No chat can take an id that is a route of the history API (`export`): its owner could never
/// open, rename or delete it there. Every fixed segment under `/api/chats/` in the OpenAPI
/// document is refused as a chat id, so a new route cannot shadow a chat either.
#[tokio::test]
async fn a_chat_id_that_names_a_route_is_refused() {
    let rest = spawn_rest().await;
    let doc = rest.get(ADMIN, "/api/openapi.json").await.body;
    let fixed: Vec<String> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter_map(|path| path.strip_prefix("/api/chats/"))
        .map(|rest| rest.split('/').next().unwrap_or_default().to_owned())
        .filter(|segment| !segment.starts_with('{'))
        .collect();
    assert_eq!(fixed, ["export"], "the history API's fixed routes");
    for id in &fixed {
        for who in [ADMIN, COLLEAGUE] {
            assert_eq!(
                say(&rest, who, id, "How many students do we have?", None).await,
                StatusCode::BAD_REQUEST,
                "{who} {id}"
            );
        }
    }
    assert_eq!(rest.count("threads").await, 0);
    // Ids that merely look like it are ordinary chats, and open, rename and delete.
    for id in ["Export", "export-1", "exports"] {
        said(&rest, ADMIN, id, "How many students do we have?").await;
        assert_eq!(
            rest.get(ADMIN, &format!("/api/chats/{id}")).await.status,
            StatusCode::OK
        );
        let renamed = rest
            .patch(
                ADMIN,
                &format!("/api/chats/{id}"),
                json!({ "title": "Mine" }),
            )
            .await;
        assert_eq!(renamed.status, StatusCode::OK, "{id}");
        assert_eq!(
            delete(&rest, ADMIN, &format!("/api/chats/{id}"))
                .await
                .status,
            StatusCode::NO_CONTENT
        );
    }
    // The export is still the export.
    let export = rest.get(ADMIN, "/api/chats/export").await;
    assert_eq!(export.status, StatusCode::OK);
    assert!(export.body["chats"].is_array(), "{:?}", export.body);
}

/// Titles and feedback comments pass the check names pass: NUL, escape sequences, and bidi or
/// zero-width characters are refused with 400 (NUL used to be a 500 from Postgres); a title taken
/// from the first message drops them. As the owner and as a colleague: never a 5xx.
#[tokio::test]
async fn titles_and_comments_refuse_what_names_refuse() {
    let rest = spawn_rest().await;
    let turn = said(
        &rest,
        ADMIN,
        "t",
        "Sci\u{200B}ences\u{202E} report\u{1b}[2J now",
    )
    .await;
    reply(&rest, ADMIN, "t", turn, "msg-t", "Done.").await;
    assert_eq!(
        rest.get(ADMIN, "/api/chats/t").await.body["title"],
        "Sciences report[2J now"
    );
    let hostile = [
        "nul\0here",
        "\0",
        "Sciences\u{202E}txt.exe",
        "Scien\u{200B}ces",
        "\u{2066}Sciences\u{2069}",
        "\u{FEFF}Sciences",
        "red\u{1b}[31m",
        "bell\u{7}",
        "del\u{7f}",
    ];
    for text in hostile {
        for who in [ADMIN, COLLEAGUE] {
            let renamed = rest
                .patch(who, "/api/chats/t", json!({ "title": text }))
                .await;
            assert_eq!(
                renamed.status,
                StatusCode::BAD_REQUEST,
                "{who} {text:?}: {:?}",
                renamed.body
            );
            assert_eq!(renamed.body["error"]["code"], "invalid_arguments");
            let rated = rest
                .post(
                    who,
                    "/api/chats/t/messages/msg-t/feedback",
                    json!({ "rating": "down", "comment": text }),
                )
                .await;
            assert_eq!(
                rated.status,
                StatusCode::BAD_REQUEST,
                "{who} {text:?}: {:?}",
                rated.body
            );
        }
        // A message id with a control character is no reply of the chat.
        let id = encoded(text);
        let rated = rest
            .post(
                ADMIN,
                &format!("/api/chats/t/messages/{id}/feedback"),
                json!({ "rating": "up" }),
            )
            .await;
        assert!(
            !rated.status.is_server_error(),
            "{text:?}: {:?}",
            rated.body
        );
    }
    assert_eq!(rest.count("chat_feedback").await, 0);
    assert_eq!(
        rest.get(ADMIN, "/api/chats/t").await.body["title"],
        "Sciences report[2J now"
    );
    // What stays allowed: any script, emoji; a comment's lines (a lone \r becomes a line break).
    let renamed = rest
        .patch(
            ADMIN,
            "/api/chats/t",
            json!({ "title": "  Études\tसूचना 数学 ❤️ " }),
        )
        .await;
    assert_eq!(renamed.body["title"], "Études सूचना 数学 ❤️");
    let rated = rest
        .post(
            ADMIN,
            "/api/chats/t/messages/msg-t/feedback",
            json!({ "rating": "down", "comment": "It missed\rthe Kololo ones\r\n\tall of them" }),
        )
        .await;
    assert_eq!(rated.status, StatusCode::NO_CONTENT, "{:?}", rated.body);
    assert_eq!(
        rest.get(ADMIN, "/api/chats/t").await.body["feedback"]["msg-t"]["comment"],
        "It missed\nthe Kololo ones\n\tall of them"
    );
}

/// A chat message is bounded as a whole as the chat keeps it — metadata and every part, not only
/// its text: a 23-byte text with 300 KiB of client metadata, or of a part of another type, is
/// refused (413) and nothing is stored. A message within the bound reads back as sent.
#[tokio::test]
async fn a_stored_message_is_bounded_as_a_whole() {
    let rest = spawn_rest().await;
    let bound = rest.state.settings.chat.max_stored_message_bytes;
    let padding = "x".repeat(300 * 1024);
    let text = json!({ "type": "text", "text": "How many students are?" });
    for message in [
        json!({ "id": "m1", "role": "user", "parts": [text], "metadata": { "pad": padding } }),
        json!({ "id": "m1", "role": "user", "parts": [text, { "type": "data-x", "data": padding }] }),
        json!({ "id": "m1", "role": "user", "parts": [text, { "type": "reasoning", "text": padding }] }),
        json!({ "id": "m1", "role": "user", "parts": [
            { "type": "text", "text": "How many students are?", "providerMetadata": { "pad": padding } },
        ] }),
        // Just over the bound, with many small parts.
        json!({ "id": "m1", "role": "user", "parts": std::iter::once(text.clone())
            .chain((0..60).map(|_| json!({ "type": "data-x", "data": "y".repeat(bound / 60) })))
            .collect::<Vec<_>>() }),
    ] {
        let body = json!({ "id": "big", "messages": [message] }).to_string();
        // The status first, the body unread: an accepted POST is a stream no worker ends here.
        let (status, _) = rest
            .send_raw(
                rest.request(Method::POST, "/api/chat", Some(ADMIN))
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(body.clone()))
                    .unwrap(),
            )
            .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        let reply = rest.json(Method::POST, ADMIN, "/api/chat", &body).await;
        assert_eq!(reply.body["error"]["code"], "too_large", "{:?}", reply.body);
    }
    assert_eq!(rest.count("chat_turns").await, 0);
    // Within the bound: kept and served as the client sent it.
    let sent = json!({ "id": "m2", "role": "user", "parts": [
        text, { "type": "data-note", "data": { "n": "z".repeat(1000) } },
    ], "metadata": { "from": "hub" } });
    let body = json!({ "id": "ok", "messages": [sent] }).to_string();
    let (status, _) = rest
        .send_raw(
            rest.request(Method::POST, "/api/chat", Some(ADMIN))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    rest.finish_turns_of(ADMIN).await;
    assert_eq!(
        rest.get(ADMIN, "/api/chats/ok").await.body["messages"][0],
        sent
    );
}

/// A reopened chat keeps each tool call's label and the specialist that made it: the history
/// read carries what the stream's transient `data-tool-label` parts said (the stream and the
/// read share the chunk mapper; `tests/it/node.rs` compares them with the real client's).
#[tokio::test]
async fn a_reopened_chat_keeps_each_tool_calls_label_and_specialist() {
    let rest = spawn_rest().await;
    let turn = said(&rest, TEACHER, "att", "Record attendance for S1 Blue").await;
    let call = |id: &str, tool: &str, label: &str, by: Option<Subagent>| {
        vec![
            (
                by,
                TurnEventKind::ToolInputStart {
                    tool_call_id: id.to_owned(),
                    tool_name: tool.to_owned(),
                    label: label.to_owned(),
                },
            ),
            (
                by,
                TurnEventKind::ToolInputAvailable {
                    tool_call_id: id.to_owned(),
                    tool_name: tool.to_owned(),
                    input: json!({}),
                },
            ),
            (
                by,
                TurnEventKind::ToolOutputAvailable {
                    tool_call_id: id.to_owned(),
                    output: json!({ "data": {} }),
                },
            ),
        ]
    };
    let mut events = vec![
        (
            None,
            TurnEventKind::Start {
                message_id: "msg-a".to_owned(),
                trace_id: None,
            },
        ),
        (None, TurnEventKind::StartStep),
    ];
    events.extend(call("c-task", "task", "Asking a specialist…", None));
    events.extend(call(
        "c-att",
        "record_attendance",
        "Recording attendance…",
        Some(Subagent::ClassTeacher),
    ));
    events.extend([
        (None, TurnEventKind::FinishStep),
        (
            None,
            TurnEventKind::Finish {
                reason: FinishReason::Stop,
                usage: None,
                model: None,
            },
        ),
    ]);
    record(&rest, TEACHER, "att", turn, events, "Recorded.").await;
    let chat = rest.get(TEACHER, "/api/chats/att").await.body;
    assert_eq!(
        chat["toolLabels"],
        json!({
            "c-task": { "toolCallId": "c-task", "toolName": "task", "label": "Asking a specialist…", "agent": "rover" },
            "c-att": { "toolCallId": "c-att", "toolName": "record_attendance", "label": "Recording attendance…", "agent": "class_teacher" },
        }),
        "{chat:#}"
    );
    // The labels are beside the messages, never in them (a client keeps transient parts out).
    assert!(!chat["messages"].to_string().contains("data-tool-label"));
    // A colleague's read of the same id is an unknown chat.
    assert_eq!(
        rest.get(COLLEAGUE, "/api/chats/att").await.status,
        StatusCode::NOT_FOUND
    );
}

/// The export streams: its body has no length known in advance (chunked on the wire), and it is
/// what it was — every chat of the caller's, oldest first, each exactly as `GET /api/chats/{id}`
/// reads it — never a colleague's.
#[tokio::test]
async fn the_export_streams_and_holds_what_it_held() {
    use axum::body::HttpBody as _;
    let rest = spawn_rest().await;
    for n in 0..5 {
        let chat = format!("e{n}");
        let turn = said(&rest, ADMIN, &chat, &format!("Question {n}")).await;
        reply(
            &rest,
            ADMIN,
            &chat,
            turn,
            &format!("msg-{n}"),
            &format!("Answer {n}"),
        )
        .await;
    }
    said(&rest, COLLEAGUE, "theirs", "Not the admin's").await;
    let response = rest
        .router
        .clone()
        .oneshot(
            rest.request(Method::GET, "/api/chats/export", Some(ADMIN))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get(header::CONTENT_LENGTH).is_none());
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    let body = response.into_body();
    assert_eq!(body.size_hint().exact(), None, "the export is built whole");
    let export: Value =
        serde_json::from_slice(&axum::body::to_bytes(body, usize::MAX).await.unwrap()).unwrap();
    let mut expected = Vec::new();
    for n in 0..5 {
        expected.push(rest.get(ADMIN, &format!("/api/chats/e{n}")).await.body);
    }
    assert_eq!(export["chats"], Value::Array(expected));
    assert_eq!(export["userId"], json!(rest.db.ids.user(ADMIN)));
    assert!(export["exportedAt"].is_string());
    assert_eq!(export.as_object().unwrap().len(), 3);
    // A colleague's export holds their chat only; one with no chats is an empty list.
    let theirs = rest.get(COLLEAGUE, "/api/chats/export").await.body;
    assert_eq!(theirs["chats"].as_array().unwrap().len(), 1);
    assert_eq!(theirs["chats"][0]["id"], "theirs");
    let none = rest.get(TEACHER, "/api/chats/export").await.body;
    assert_eq!(none["chats"], json!([]));
}

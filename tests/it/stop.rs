//! Stop and double-texting, through the real gateway: `POST /api/chat/{id}/stop` reaches whichever
//! worker holds the turn (from any replica), cuts the model stream, lets a started write finish
//! and starts nothing after it; the stream ends with `abort` then `[DONE]`, and what was said and
//! done stays in the thread's history. A new message on a busy chat is queued or interrupts, as
//! `chat.double_texting` says (refusing it, the default, is the gateway's hardening suite's).

use std::future::Future;
use std::net::SocketAddr;

use serde_json::Value;

use crate::checker::{ADMIN, DOS, say_watching, sciences};
use crate::stack::{Service, Stack, Turn, read_stream};

/// A plain-text answer long enough to stop while it streams (the scripted model's
/// `describe-how-you-work` rule; the stack streams it a word every 40 ms).
const LONG: &str = "Please describe how you work";
const SLOW_MODEL: &[&str] = &["--chunk-delay-ms", "40"];

/// Posts `text` and reads the whole stream; when the first chunk of type `at` arrives, runs
/// `then` while the stream goes on, and returns its output too.
pub(crate) async fn say_and<F, Fut>(
    stack: &Stack,
    email: &str,
    chat: &str,
    text: &str,
    at: &str,
    then: F,
) -> (Turn, Fut::Output)
where
    F: FnOnce() -> Fut,
    Fut: Future,
{
    let (reached, reached_rx) = tokio::sync::oneshot::channel();
    let mut reached = Some(reached);
    let reading = say_watching(stack, email, chat, text, |chunk| {
        if chunk["type"] == at
            && let Some(reached) = reached.take()
        {
            let _ = reached.send(());
        }
    });
    let acting = async {
        reached_rx
            .await
            .unwrap_or_else(|_| panic!("the stream ended without a {at} chunk"));
        then().await
    };
    tokio::join!(reading, acting)
}

async fn post_stop(stack: &Stack, gateway: SocketAddr, email: &str, chat: &str) -> u16 {
    stack
        .http
        .post(format!("http://{gateway}/api/chat/{chat}/stop"))
        .bearer_auth(stack.token(email))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The messages a turn left in its thread's history.
async fn history(stack: &Stack, turn: &Turn) -> Vec<Value> {
    let id = turn.of_type("start")[0]["messageMetadata"]["turnId"]
        .as_str()
        .expect("the start chunk names the turn")
        .parse::<uuid::Uuid>()
        .unwrap();
    sqlx::query_scalar("SELECT message FROM conversation_log WHERE turn_id = $1 ORDER BY position")
        .bind(id)
        .fetch_all(&stack.owner)
        .await
        .unwrap()
}

/// The stream of a stopped turn: `abort` then `[DONE]`, no `finish`, every text part closed.
fn assert_aborted(turn: &Turn) {
    assert_eq!(turn.status, 200);
    assert!(turn.done, "the stream ends with [DONE]: {:#?}", turn.chunks);
    assert_eq!(
        turn.chunks.last().map(|c| &c["type"]),
        Some(&Value::from("abort")),
        "{:#?}",
        turn.chunks
    );
    assert!(turn.of_type("finish").is_empty(), "{:#?}", turn.chunks);
    assert_eq!(
        turn.of_type("text-start").len(),
        turn.of_type("text-end").len(),
        "every text part is closed: {:#?}",
        turn.chunks
    );
}

#[tokio::test]
async fn stop_from_another_replica_cuts_the_reply_and_keeps_what_was_said() {
    let mut stack = Stack::start_with_model(SLOW_MODEL).await;
    let other = stack.another_gateway();
    let full = stack.say(ADMIN, "chat-whole", LONG).await;
    assert_eq!(full.finish_reason(), Some("stop"));

    // The stream is on the first replica; Stop is sent to the other, at the first word.
    let chat = "chat-stopped";
    let (turn, stopped) = say_and(&stack, ADMIN, chat, LONG, "text-delta", || {
        post_stop(&stack, other, ADMIN, chat)
    })
    .await;
    assert_eq!(stopped, 200, "answered once the turn had stopped");
    assert_aborted(&turn);
    let said = turn.text();
    assert!(
        !said.is_empty() && said.len() < full.text().len() && full.text().starts_with(&said),
        "the reply was cut where it was: {said:?}"
    );
    let metadata = &turn.of_type("message-metadata")[0]["messageMetadata"];
    assert!(
        metadata["usage"]["inputTokens"].as_u64().unwrap() > 0,
        "{metadata}"
    );
    assert_eq!(metadata["stopped"], true, "{metadata}");

    // What was said is the thread's: the staff member's message and the partial answer.
    let kept = history(&stack, &turn).await;
    assert_eq!(kept.len(), 2, "{kept:#?}");
    assert_eq!(kept[0]["content"], LONG);
    assert_eq!(kept[1]["role"], "assistant");
    assert_eq!(kept[1]["content"], said.as_str());

    // A resume (on either replica) replays the stopped turn as it streamed, `abort` and all.
    let replayed = read_stream(stack.resume(other, ADMIN, chat).await).await;
    assert_aborted(&replayed);
    assert_eq!(replayed.text(), said);

    // Nothing runs any more: a second Stop has nothing to do, and the chat takes the next
    // message at once.
    assert_eq!(post_stop(&stack, stack.gateway, ADMIN, chat).await, 204);
    let next = stack.say(ADMIN, chat, "What's the date today?").await;
    assert_eq!(next.finish_reason(), Some("stop"), "{:#?}", next.chunks);
}

#[tokio::test]
async fn stop_during_a_tool_call_lets_the_write_finish_and_starts_nothing_after() {
    let stack = Stack::start().await;
    let chat = "chat-stop-write";
    // The tool server's insert waits on this lock, so the call is running when Stop arrives.
    let mut lock = stack.owner.begin().await.unwrap();
    sqlx::query("LOCK TABLE departments IN SHARE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let (turn, (theirs, ours)) = say_and(
        &stack,
        ADMIN,
        chat,
        "Create a department called Sciences",
        "tool-input-available",
        || async {
            // Only the chat's owner may stop it: a colleague's Stop under the same id names the
            // colleague's own (empty) chat, and stops nothing.
            let theirs = post_stop(&stack, stack.gateway, DOS, chat).await;
            // Stop answers once the turn has ended, and it cannot end while the call waits:
            // the lock goes once the stop is recorded.
            let (ours, ()) = tokio::join!(post_stop(&stack, stack.gateway, ADMIN, chat), async {
                until_a_stop_is_recorded(&stack).await;
                lock.commit().await.unwrap();
            });
            (theirs, ours)
        },
    )
    .await;
    assert_eq!(theirs, 204);
    assert_eq!(ours, 200);
    assert_aborted(&turn);
    // The write that had started finished, once; the model was not called again.
    assert_eq!(
        turn.of_type("tool-output-available").len(),
        1,
        "{:#?}",
        turn.chunks
    );
    assert!(
        turn.text().is_empty(),
        "nothing after the call: {:#?}",
        turn.chunks
    );
    assert_eq!(sciences(&stack).await, 1);
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE call_id IS NOT NULL")
            .await,
        1
    );
    let kept = history(&stack, &turn).await;
    let roles: Vec<&str> = kept.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool"], "{kept:#?}");

    // The next turn reads a valid thread and answers.
    let next = stack.say(ADMIN, chat, "What's the date today?").await;
    assert_eq!(next.finish_reason(), Some("stop"), "{:#?}", next.chunks);
}

#[tokio::test]
async fn a_stop_no_worker_hears_still_stops_the_turn() {
    let stack = Stack::start_with(&[], &[("ROVER_CHAT__STOP_WAIT_MS", "100")]).await;
    // No worker: the turn waits in the queue, and the word to stop it reaches nobody.
    stack.kill(Service::Worker);
    stack.exited(Service::Worker).await;
    let chat = "chat-stop-queued";
    let messages = serde_json::json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "Create a department called Sciences" }] }]);
    let response = stack
        .post(stack.gateway, &stack.token(ADMIN), chat, messages)
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        post_stop(&stack, stack.gateway, ADMIN, chat).await,
        202,
        "still stopping"
    );

    // The worker that takes the turn finds the stop recorded: nothing runs.
    stack.restart(Service::Worker, &[], &[]);
    let turn = read_stream(response).await;
    assert_aborted(&turn);
    assert!(turn.tools().is_empty(), "{:#?}", turn.chunks);
    assert_eq!(sciences(&stack).await, 0);
    let kept = history(&stack, &turn).await;
    assert_eq!(kept.len(), 1, "only the staff member's message: {kept:#?}");
}

#[tokio::test]
async fn a_stop_whose_word_is_lost_is_seen_at_the_next_step() {
    let stack = Stack::start().await;
    // The write waits on this lock while the stop is recorded in Postgres alone — as if the
    // word on the control exchange had been lost.
    let mut lock = stack.owner.begin().await.unwrap();
    sqlx::query("LOCK TABLE departments IN SHARE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let (turn, ()) = say_and(
        &stack,
        ADMIN,
        "chat-stop-unheard",
        "Create a department called Sciences",
        "tool-input-available",
        || async {
            sqlx::query("UPDATE open_turns SET stop_requested_at = now()")
                .execute(&stack.owner)
                .await
                .unwrap();
            lock.commit().await.unwrap();
        },
    )
    .await;
    // The step that was running finished and was recorded; the record saw the stop, so the
    // model was not called again.
    assert_aborted(&turn);
    assert_eq!(turn.of_type("tool-output-available").len(), 1);
    assert!(turn.text().is_empty(), "{:#?}", turn.chunks);
    assert_eq!(sciences(&stack).await, 1);
}

/// Returns once a stop is recorded in `open_turns` (Postgres has no event to await for it; the
/// suite's deadline bounds the wait).
async fn until_a_stop_is_recorded(stack: &Stack) {
    until(
        stack,
        "a stop is recorded",
        "SELECT count(*) FROM open_turns WHERE stop_requested_at IS NOT NULL",
    )
    .await;
}

/// Waits (at most the test kit's bound) until `count_sql` counts something: `what` happened.
async fn until(stack: &Stack, what: &str, count_sql: &str) {
    rover_testkit::within(what, async {
        while stack.count(count_sql).await == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// Posts a first message, and a second on the same chat once the first has said a word; reads
/// both streams to their ends.
async fn double_text(stack: &Stack, chat: &str) -> (Turn, Turn) {
    let (first, second) = say_and(stack, ADMIN, chat, LONG, "text-delta", || async {
        let messages = serde_json::json!([{ "id": "u2", "role": "user", "parts": [{ "type": "text", "text": "What's the date today?" }] }]);
        read_stream(
            stack
                .post(stack.gateway, &stack.token(ADMIN), chat, messages)
                .await,
        )
        .await
    })
    .await;
    (first, second)
}

/// The second message ran on the history the first turn left: the first message, the reply the
/// client saw (whole or cut), then the second message.
async fn assert_ran_after(stack: &Stack, first: &Turn, second: &Turn) {
    let mut kept = history(stack, first).await;
    kept.extend(history(stack, second).await);
    let kept: Vec<(String, String)> = kept
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(kept[0], ("user".to_owned(), LONG.to_owned()));
    assert_eq!(kept[1], ("assistant".to_owned(), first.text()));
    assert_eq!(
        kept[2],
        ("user".to_owned(), "What's the date today?".to_owned())
    );
}

#[tokio::test]
async fn an_enqueued_message_runs_after_the_reply_it_waited_for() {
    let stack = Stack::start_with(SLOW_MODEL, &[("ROVER_CHAT__DOUBLE_TEXTING", "enqueue")]).await;
    let (first, second) = double_text(&stack, "chat-enqueue").await;
    assert_eq!(first.finish_reason(), Some("stop"), "{:#?}", first.chunks);
    assert_eq!(second.status, 200);
    assert_eq!(second.finish_reason(), Some("stop"), "{:#?}", second.chunks);
    assert_eq!(second.tools(), ["get_current_date"]);
    // The second turn ran on the history the first left, whole.
    assert_ran_after(&stack, &first, &second).await;
}

#[tokio::test]
async fn an_interrupting_message_stops_the_reply_then_runs() {
    let stack = Stack::start_with(SLOW_MODEL, &[("ROVER_CHAT__DOUBLE_TEXTING", "interrupt")]).await;
    let (first, second) = double_text(&stack, "chat-interrupt").await;
    assert_aborted(&first);
    let full = stack.say(ADMIN, "chat-whole", LONG).await.text();
    assert!(first.text().len() < full.len(), "{:?}", first.text());
    assert_eq!(second.finish_reason(), Some("stop"), "{:#?}", second.chunks);
    assert_ran_after(&stack, &first, &second).await;
}

/// A client that disconnects while its message is being accepted cannot leave the turn half
/// opened: here the gateway is held inside its transaction (the school's turn lock, taken by the
/// test) when the client goes away; once let go, the turn is committed *and* published, a worker
/// runs it to its end, and the chat takes the next message. (Before, the handler was dropped with
/// the connection: between its commit and its publish that left a turn no worker would ever run,
/// holding the chat — and a Stop waited `chat.stop_wait_ms` for an end that never came.)
#[tokio::test]
async fn a_client_that_disconnects_mid_accept_cannot_leave_a_turn_half_opened() {
    use tokio::io::AsyncWriteExt as _;
    let stack = Stack::start().await;
    let school = stack.db.ids.hill.as_uuid();
    let mut holder = stack.owner.begin().await.unwrap();
    sqlx::query(
        "SELECT pg_advisory_xact_lock(hashtextextended('rover.open_turns:' || $1::text, 0))",
    )
    .bind(school)
    .execute(&mut *holder)
    .await
    .unwrap();
    let body = serde_json::json!({ "id": "chat-gone", "messages": [{ "id": "u1", "role": "user",
        "parts": [{ "type": "text", "text": "List the departments" }] }] })
    .to_string();
    let mut client = tokio::net::TcpStream::connect(stack.gateway).await.unwrap();
    let request = format!(
        "POST /api/chat HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        stack.gateway,
        stack.token(ADMIN),
        body.len()
    );
    client.write_all(request.as_bytes()).await.unwrap();
    // The gateway waits on the lock the test holds; then the client goes away.
    until(
        &stack,
        "the gateway waits on the lock",
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
    )
    .await;
    drop(client);
    holder.rollback().await.unwrap();
    // The turn opens, is published and ends; its stream replays to the end.
    until(
        &stack,
        "the turn the client left opens",
        "SELECT count(*) FROM threads WHERE last_turn_id IS NOT NULL",
    )
    .await;
    let replay = read_stream(stack.resume(stack.gateway, ADMIN, "chat-gone").await).await;
    assert!(replay.done, "{:?}", replay.chunks);
    assert!(
        replay.chunks.iter().any(|c| c["type"] == "finish"),
        "{:?}",
        replay.chunks
    );
    assert_eq!(stack.count("SELECT count(*) FROM open_turns").await, 0);
    let next = stack
        .say(ADMIN, "chat-gone", "What's the date today?")
        .await;
    assert_eq!(next.status, 200);
    assert!(next.chunks.iter().any(|c| c["type"] == "finish"));
}

/// A Stop pressed while the message's turn is still being opened waits for it and stops it (the
/// gateway's transactions that open turns and those that stop them are serialised per school):
/// it does not answer "nothing was running" and let the reply run. Here both are held at the
/// school's turn lock, taken by the test, the message first.
#[tokio::test]
async fn a_stop_pressed_while_the_turn_is_being_opened_stops_it() {
    let stack = Stack::start().await;
    let mut holder = stack.owner.begin().await.unwrap();
    sqlx::query(
        "SELECT pg_advisory_xact_lock(hashtextextended('rover.open_turns:' || $1::text, 0))",
    )
    .bind(stack.db.ids.hill.as_uuid())
    .execute(&mut *holder)
    .await
    .unwrap();
    let waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted";
    let message = tokio::spawn({
        let (http, gateway, token) = (stack.http.clone(), stack.gateway, stack.token(ADMIN));
        async move {
            let body = serde_json::json!({ "id": "chat-quick-stop", "messages": [{ "id": "u1",
                "role": "user", "parts": [{ "type": "text", "text": LONG }] }] });
            let response = http
                .post(format!("http://{gateway}/api/chat"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            read_stream(response).await
        }
    });
    until(&stack, "the message waits on the lock", waiting).await;
    let stop = tokio::spawn({
        let (http, gateway, token) = (stack.http.clone(), stack.gateway, stack.token(ADMIN));
        async move {
            http.post(format!("http://{gateway}/api/chat/chat-quick-stop/stop"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    });
    rover_testkit::within("the stop waits on the lock too", async {
        while stack.count(waiting).await < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    holder.rollback().await.unwrap();
    let stopped = stop.await.unwrap();
    assert_eq!(stopped, 200, "the stop found the turn and it ended");
    let turn = message.await.unwrap();
    assert_aborted(&turn);
    assert_eq!(stack.count("SELECT count(*) FROM open_turns").await, 0);
}

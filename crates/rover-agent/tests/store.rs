//! The agent loop against its in-memory [`TurnStore`]: what the loop asks of the store — the
//! thread it loads, each step it records (and the stop a record reports), the approval gate of a
//! write, the daily ledger, the messages it appends — with the scripted model over real HTTP and
//! a real broker for the tool RPC (no call reaches it in these tests).

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

use std::time::Duration;

use chrono::NaiveDate;
use rover_agent::approval::Gate;
use rover_agent::budget::{BudgetError, TurnBudget};
use rover_agent::compact::Budget;
use rover_agent::model::{ModelClient, ModelOptions};
use rover_agent::skills::SkillLibrary;
use rover_agent::{
    Emitted, Journal, Memory, MemoryStore, Mounts, Runtime, Stop, ToolRpc, TurnDeps, TurnError,
    build_agent,
};
use rover_contracts::context::*;
use rover_contracts::identity::SignedTurnIdentity;
use rover_contracts::ids::*;
use rover_contracts::permission::{Action, Permission, PermissionSnapshot, Subject};
use rover_contracts::wire::{FinishReason, TurnEventKind, TurnInput, TurnRequest};
use rover_messaging::{Broker, BrokerOptions, RpcOptions};
use rover_scripted_model::{Config, ScriptedModel};
use rover_testkit::{TestVhost, within};
use serde_json::json;

/// A school admin who may read and create departments.
fn admin() -> RuntimeContext {
    RuntimeContext {
        user_details: UserDetails {
            name: "Grace Atim".into(),
            email: "grace@hill.school".into(),
            user_id: UserId::new(),
            profile_id: ProfileId::new(),
            user_type: UserType::Administrator,
            school: SchoolRef {
                id: SchoolId::new(),
                name: "Kampala Hill School".into(),
            },
            campus: None,
        },
        run_mode: RunMode::School,
        user_permissions: PermissionSnapshot::new(vec![
            Permission::new(Action::Read, Subject::Department),
            Permission::new(Action::Create, Subject::Department),
        ]),
        capabilities: Capabilities::default(),
        calendar: Calendar {
            time_zone: "Africa/Kampala".into(),
            academic_year_id: AcademicYearId::new(),
            academic_year: "2026".into(),
            terms: vec![Term {
                id: TermId::new(),
                name: "Term 3".into(),
                starts_on: NaiveDate::from_ymd_opt(2026, 9, 14).unwrap(),
                ends_on: NaiveDate::from_ymd_opt(2026, 12, 4).unwrap(),
            }],
        },
        teaching_map: None,
        attachments: vec![],
    }
}

/// A worker's runtime: the scripted model on a free port, and an RPC client on a fresh vhost.
struct Fixture {
    runtime: Runtime,
    _vhost: TestVhost,
}

async fn fixture() -> Fixture {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let model = ScriptedModel::new(Config::default());
    tokio::spawn(model.serve(listener, std::future::pending()));
    let vhost = TestVhost::create();
    let broker = within("connect", Broker::connect(BrokerOptions::new(vhost.url())))
        .await
        .expect("connects to RabbitMQ");
    let runtime = Runtime {
        model: ModelClient::new(ModelOptions {
            base_url,
            api_key: "scripted".into(),
            model: "scripted".into(),
            text_tool_calls: true,
            provider: "openai".into(),
            fallbacks: vec![],
            timeout: Duration::from_secs(10),
            attempts: 1,
            backoff: Duration::from_millis(10),
        }),
        tools: ToolRpc {
            client: broker.rpc_client(RpcOptions::default()),
            exchange: "rover.tools".into(),
        },
        skills: SkillLibrary::default(),
        metrics: None,
        capture_content: false,
        step_limit: 6,
        context: Budget {
            max_tokens: 32_000,
            tool_result_max_tokens: 2_000,
        },
    };
    Fixture {
        runtime,
        _vhost: vhost,
    }
}

fn request(input: TurnInput) -> TurnRequest {
    TurnRequest {
        turn_id: TurnId::new(),
        thread_id: ThreadId::new(),
        message_id: "m1".into(),
        context: admin(),
        // Never sent in these tests: no call reaches the tool server.
        identity: SignedTurnIdentity::from_token("unsigned"),
        input,
    }
}

fn says(text: &str) -> TurnInput {
    TurnInput::Message {
        text: text.to_owned(),
    }
}

/// Runs `request`'s turn against `store`: how it ended, and the events it sent.
async fn run(
    fixture: &Fixture,
    request: &TurnRequest,
    store: &MemoryStore,
    budget: &TurnBudget,
) -> (Result<FinishReason, TurnError>, Vec<TurnEventKind>) {
    let mounts = Mounts { sandbox: false };
    let agent = build_agent(&request.context, &fixture.runtime.skills, mounts);
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel::<Emitted>();
    let (journal, stop) = (Journal::default(), Stop::new());
    let deps = TurnDeps {
        runtime: &fixture.runtime,
        turn: request,
        store,
        journal: &journal,
        budget,
        stop: &stop,
        events: &events,
        sandbox: None,
    };
    let ended = within("the turn", rover_agent::run(&agent, deps)).await;
    drop(events);
    let mut sent = Vec::new();
    while let Some(emitted) = received.recv().await {
        sent.push(emitted.event);
    }
    (ended, sent)
}

#[tokio::test]
async fn a_write_waits_at_the_stores_gate_and_the_turn_pauses_with_its_messages_kept() {
    let fixture = fixture().await;
    let store = MemoryStore::new(Memory {
        gate: Some(Gate::Pending {
            approval_id: "approval-1".into(),
        }),
        ..Memory::default()
    });
    let request = request(says("Create a department called Sciences"));
    let (ended, events) = run(&fixture, &request, &store, &TurnBudget::unlimited()).await;

    assert_eq!(ended.unwrap(), FinishReason::ToolCalls, "the turn paused");
    let memory = store.snapshot();
    assert_eq!(memory.gated.len(), 1, "the write asked the gate once");
    assert_eq!(memory.gated[0].tool, "create_department");
    assert_eq!(memory.gated[0].input, json!({ "name": "Sciences" }));
    assert!(
        events.iter().any(|e| matches!(e,
            TurnEventKind::ToolApprovalRequest { approval_id, .. } if approval_id == "approval-1")),
        "the client is asked: {events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, TurnEventKind::ToolOutputAvailable { .. })),
        "nothing ran: {events:?}"
    );
    // The model's step was recorded before the loop moved on; the call has no result yet.
    assert_eq!(memory.parts.len(), 1, "{:?}", memory.parts);
    assert_eq!(memory.parts[0].part, "model");
    // The staff member's message and the assistant's call are the thread's now.
    assert_eq!(memory.appended.len(), 2, "{:?}", memory.appended);
    assert_eq!(memory.appended[0]["role"], "user");
    assert_eq!(
        memory.appended[1]["tool_calls"][0]["function"]["name"],
        "create_department"
    );
}

#[tokio::test]
async fn a_declined_write_is_told_to_the_model_and_not_run() {
    let fixture = fixture().await;
    let store = MemoryStore::new(Memory {
        gate: Some(Gate::Denied {
            reason: Some("not this term".into()),
        }),
        ..Memory::default()
    });
    let request = request(says("Create a department called Sciences"));
    let (ended, events) = run(&fixture, &request, &store, &TurnBudget::unlimited()).await;

    assert!(ended.is_ok(), "{ended:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, TurnEventKind::ToolOutputDenied { .. })),
        "{events:?}"
    );
    let memory = store.snapshot();
    let denial = memory
        .parts
        .iter()
        .find(|p| p.part != "model")
        .expect("the denial is recorded");
    assert!(
        denial.record["denied"]["error"]
            .as_str()
            .unwrap()
            .contains("not this term"),
        "{:?}",
        denial.record
    );
}

#[tokio::test]
async fn a_stop_the_store_reports_at_a_recorded_step_ends_the_turn_before_any_call_runs() {
    let fixture = fixture().await;
    // The stop was asked on another replica and its word lost: the store says so at the first
    // record.
    let store = MemoryStore::new(Memory {
        stop: true,
        ..Memory::default()
    });
    let request = request(says("List the departments"));
    let (ended, events) = run(&fixture, &request, &store, &TurnBudget::unlimited()).await;

    assert_eq!(ended.unwrap(), FinishReason::Abort);
    assert!(
        events.iter().any(|e| matches!(e,
            TurnEventKind::ToolOutputError { error_text, .. } if error_text.starts_with("Not done: the staff member stopped"))),
        "the call was not run: {events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, TurnEventKind::ToolOutputAvailable { .. })),
        "{events:?}"
    );
}

#[tokio::test]
async fn the_stores_daily_ledger_refusing_ends_the_turn_before_the_model_is_called() {
    let fixture = fixture().await;
    let store = MemoryStore::new(Memory {
        daily_tokens: 10,
        ..Memory::default()
    });
    let request = request(says("List the departments"));
    let (ended, events) = run(&fixture, &request, &store, &TurnBudget::unlimited()).await;

    assert!(
        matches!(ended, Err(TurnError::Budget(BudgetError::UserDaily(10)))),
        "{ended:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, TurnEventKind::TextDelta { .. })),
        "{events:?}"
    );
    let memory = store.snapshot();
    assert!(memory.appended.is_empty(), "nothing was kept");
    assert_eq!(memory.reserved, 0, "nothing stays held");
}

#[tokio::test]
async fn an_answer_to_a_question_the_thread_is_not_waiting_on_is_refused() {
    let fixture = fixture().await;
    let store = MemoryStore::default();
    let request = request(TurnInput::AskUserAnswer {
        tool_call_id: "call-1".into(),
        output: json!("S1 Blue"),
    });
    let (ended, _) = run(&fixture, &request, &store, &TurnBudget::unlimited()).await;

    assert!(matches!(ended, Err(TurnError::NoQuestion)), "{ended:?}");
    assert!(store.snapshot().appended.is_empty());
}

#[tokio::test]
async fn a_reply_is_appended_after_the_loaded_history_and_the_ledger_is_settled() {
    let fixture = fixture().await;
    let store = MemoryStore::new(Memory {
        loaded: rover_agent::Loaded {
            history: vec![
                json!({ "role": "user", "content": "Hello" }),
                json!({ "role": "assistant", "content": "Hello! How can I help?" }),
            ],
            ..Default::default()
        },
        ..Memory::default()
    });
    let request = request(says("What is today's date?"));
    let (ended, _) = run(&fixture, &request, &store, &TurnBudget::unlimited()).await;

    assert_eq!(ended.unwrap(), FinishReason::Stop);
    let memory = store.snapshot();
    assert_eq!(memory.appended[0]["content"], "What is today's date?");
    assert_eq!(
        memory.appended.last().unwrap()["role"],
        "assistant",
        "{:?}",
        memory.appended
    );
    assert_eq!(memory.reserved, 0, "every reservation was settled");
    assert!(memory.used.input_tokens > 0, "{:?}", memory.used);
}

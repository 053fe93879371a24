//! One least-privilege broker user per service: the topology is declared once by an
//! administrator (`rover-toolserver broker setup`), each service connects as its own user with
//! only the rights that command prints and only checks the topology, a whole turn with a
//! subagent's write and an MCP client's tool call still work, the gateway still reads the work
//! queues' consumers for its metrics — and each user is refused what belongs to another service.

use std::collections::HashMap;

use rover_messaging::{Broker, BrokerOptions, OutgoingMessage, Topology};
use rover_testkit::{TestVhost, rabbitmqctl};

use crate::stack::Stack;

/// Broker users made for one test, removed when it ends.
struct Users(Vec<String>);

impl Drop for Users {
    fn drop(&mut self) {
        for user in &self.0 {
            let _ = std::panic::catch_unwind(|| rabbitmqctl(&["delete_user", user]));
        }
    }
}

#[tokio::test]
async fn each_service_runs_as_its_own_user_with_only_the_rights_it_needs() {
    let vhost = TestVhost::create();
    // The administrator (guest, on this vhost) declares the topology and prints the rights.
    let output = rover_stack::command("rover-toolserver")
        .unwrap()
        .args(["broker", "setup"])
        .env("ROVER_AMQP__URL", vhost.url())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rights = String::from_utf8(output.stdout).unwrap();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let mut users = Users(Vec::new());
    let mut per_service = HashMap::new();
    let mut urls = HashMap::new();
    for line in rights.lines() {
        let [service, configure, write, read] = line.split('\t').collect::<Vec<_>>()[..] else {
            panic!("a line of rights: {line}");
        };
        let user = format!("{service}-{suffix}");
        rabbitmqctl(&["add_user", &user, "secret"]);
        users.0.push(user.clone());
        rabbitmqctl(&[
            "set_permissions",
            "-p",
            &vhost.name,
            &user,
            configure,
            write,
            read,
        ]);
        let url = format!("amqp://{user}:secret@127.0.0.1:5672/{}", vhost.name);
        urls.insert(service.to_owned(), url.clone());
        per_service.insert(
            service,
            vec![
                ("ROVER_AMQP__URL".to_owned(), url),
                (
                    "ROVER_AMQP__DECLARE_TOPOLOGY".to_owned(),
                    "false".to_owned(),
                ),
            ],
        );
    }
    assert_eq!(urls.len(), 3, "{rights}");

    let stack = Stack::start_on(vhost, &[], &[], &per_service).await;
    // Rover → the class teacher subagent → two tool calls, one of them a write.
    let turn = stack
        .say(
            "amina@hill.school",
            "chat-least-privilege",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    assert_eq!(turn.finish_reason(), Some("stop"), "{:?}", turn.chunks);
    assert!(stack.count("SELECT count(*) FROM attendance").await > 0);
    // An MCP client's tool call, through the gateway's own user (Direct Reply-to included).
    let reply: serde_json::Value = stack
        .http
        .post(format!("http://{}/mcp", stack.gateway))
        .bearer_auth(stack.token("admin@hill.school"))
        .header("accept", "application/json, text/event-stream")
        .json(&serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "create_department", "arguments": { "name": "Least Privilege" } }
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        reply["result"]["structuredContent"]["data"]["name"], "Least Privilege",
        "{reply:#}"
    );

    // The gateway's user reads the work queues' messages and consumers for its `/metrics` (the
    // alert on a queue with no consumer): a passive declare, which needs no right of its own.
    let metrics = crate::observability::scrape(&stack, stack.gateway_metrics).await;
    // One worker consumes the turns; the tool server consumes once per RPC server (one per core).
    let consumers = |queue: &str| {
        crate::observability::sample(
            &metrics,
            &format!("rover_queue_consumers{{queue=\"{queue}\"}}"),
        )
    };
    assert_eq!(consumers("rover.turns"), 1.0, "{metrics}");
    assert!(consumers("rover.tools") >= 1.0, "{metrics}");

    // Each user is refused the other services' work.
    let topology = Topology::new("rover");
    let connect = |service: &str| {
        let url = urls[service].clone();
        async move {
            Broker::connect(BrokerOptions {
                connection_name: "least-privilege-test".to_owned(),
                ..BrokerOptions::new(url)
            })
            .await
            .unwrap()
        }
    };
    let refused = |what: &str, result: Result<(), String>| {
        let error = result.expect_err(what);
        assert!(
            error.contains("ACCESS_REFUSED") || error.contains("403") || error.contains("access"),
            "{what}: {error}"
        );
    };
    // Each user publishing where only another service may.
    for (service, exchange, key, what) in [
        (
            "rover-gateway",
            topology.turn_events_exchange(),
            "turn.x",
            "the gateway publishes a turn event",
        ),
        (
            "rover-worker",
            topology.turns_exchange(),
            rover_messaging::TURN_ROUTING_KEY,
            "the worker publishes a turn",
        ),
        (
            "rover-toolserver",
            topology.turn_events_exchange(),
            "turn.x",
            "the tool server publishes a turn event",
        ),
    ] {
        let broker = connect(service).await;
        let message = OutgoingMessage::new(b"{}".to_vec());
        refused(
            what,
            broker
                .publisher()
                .publish(&exchange, key, message)
                .await
                .map_err(|e| format!("{e:?}")),
        );
    }
    let gateway = connect("rover-gateway").await;
    refused(
        "the gateway consumes tool calls",
        gateway
            .consume(
                &topology.tools_queue(),
                rover_messaging::ConsumerOptions::default(),
                |_| async { rover_messaging::Outcome::Ack },
            )
            .await
            .map(drop)
            .map_err(|e| format!("{e:?}")),
    );
    let toolserver = connect("rover-toolserver").await;
    refused(
        "the tool server declares a queue",
        toolserver
            .declare(&Topology::new("rover"))
            .await
            .map_err(|e| format!("{e:?}")),
    );
}

//! Test support shared by Rover's test suites (a dev-dependency only): a private RabbitMQ vhost
//! per test, fresh Ed25519 turn-identity keys, and bounded waits so a failing test cannot hang CI.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use base64::Engine as _;
use rover_contracts::identity::{TurnSigner, TurnVerifier};

/// Upper bound on any single wait in a test.
pub const WAIT: Duration = Duration::from_secs(20);

/// Awaits `future`, panicking with `what` if it takes longer than [`WAIT`].
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out after {WAIT:?}: {what}"))
}

/// Runs `rabbitmqctl` and returns its standard output; panics if it fails.
pub fn rabbitmqctl(args: &[&str]) -> String {
    let output = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl runs");
    assert!(
        output.status.success(),
        "rabbitmqctl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The three-node RabbitMQ cluster of `scripts/rabbitmq-cluster.sh`, beside the default node: what
/// the chaos suite kills nodes of and `make bench` measures the cluster on.
#[derive(Debug, Clone, Copy)]
pub struct LocalCluster;

impl LocalCluster {
    /// The nodes, numbered as the script numbers them.
    pub const NODES: [usize; 3] = [1, 2, 3];

    fn script() -> PathBuf {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/rabbitmq-cluster.sh"
        ))
    }

    fn run(args: &[&str]) -> String {
        let output = Command::new(Self::script())
            .args(args)
            .output()
            .expect("scripts/rabbitmq-cluster.sh runs");
        assert!(
            output.status.success(),
            "scripts/rabbitmq-cluster.sh {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Starts the three nodes and joins them if they are not up yet (idempotent); returns once
    /// the cluster is healthy.
    pub fn start() -> LocalCluster {
        Self::run(&["start"]);
        LocalCluster
    }

    /// `host:port` of node `n`'s AMQP listener.
    pub fn address(self, n: usize) -> String {
        let base: u16 = std::env::var("ROVER_CLUSTER_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(5681);
        format!("127.0.0.1:{}", base + u16::try_from(n - 1).unwrap_or(0))
    }

    /// Every node's address, as `amqp.addresses` takes them.
    pub fn addresses(self) -> Vec<String> {
        Self::NODES.iter().map(|n| self.address(*n)).collect()
    }

    /// `rabbitmqctl` against node `n`; panics if it fails.
    pub fn ctl(self, n: usize, args: &[&str]) -> String {
        let n = n.to_string();
        let mut all = vec!["ctl", n.as_str()];
        all.extend_from_slice(args);
        Self::run(&all)
    }

    /// Whether node `n` answers.
    pub fn is_running(self, n: usize) -> bool {
        Command::new(Self::script())
            .args(["running", &n.to_string()])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// A node that answers (the first), for commands about the whole cluster.
    pub fn live_node(self) -> usize {
        Self::NODES
            .into_iter()
            .find(|n| self.is_running(*n))
            .expect("a live cluster node")
    }

    /// `kill -9` on node `n`'s Erlang VM: the node dies with no goodbye to anyone.
    pub fn kill(self, n: usize) {
        let pid = Self::run(&["pid", &n.to_string()]);
        let status = Command::new("kill")
            .args(["-9", pid.trim()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -9 {pid}");
    }

    /// Starts node `n` again (after [`LocalCluster::kill`]); it rejoins from its own data.
    pub fn start_node(self, n: usize) {
        Self::run(&["start-node", &n.to_string()]);
    }

    /// Node `n` of the node name `rover-c<n>@…`.
    pub fn node_of(name: &str) -> Option<usize> {
        name.strip_prefix("rover-c")?
            .split('@')
            .next()?
            .parse()
            .ok()
    }
}

/// Where a [`TestVhost`] lives.
#[derive(Debug, Clone, Copy)]
enum Host {
    /// The default node on 5672.
    Default,
    /// The local three-node cluster.
    Cluster(LocalCluster),
}

impl Host {
    fn ctl(self, args: &[&str]) -> String {
        match self {
            Host::Default => rabbitmqctl(args),
            Host::Cluster(cluster) => cluster.ctl(cluster.live_node(), args),
        }
    }
}

/// A RabbitMQ vhost that exists for one test and is deleted, with everything in it, when dropped.
#[derive(Debug)]
pub struct TestVhost {
    /// The vhost's name (`rover-test-<uuid>`).
    pub name: String,
    host: Host,
}

impl TestVhost {
    /// Creates the vhost and gives `guest` full rights on it.
    pub fn create() -> Self {
        let name = format!("rover-test-{}", uuid::Uuid::new_v4());
        rabbitmqctl(&["add_vhost", &name]);
        rabbitmqctl(&["set_permissions", "-p", &name, "guest", ".*", ".*", ".*"]);
        Self {
            name,
            host: Host::Default,
        }
    }

    /// Creates the vhost on the local cluster (started if it is not up), with `guest`'s rights.
    pub fn create_on(cluster: LocalCluster) -> Self {
        let name = format!("rover-test-{}", uuid::Uuid::new_v4());
        let node = cluster.live_node();
        cluster.ctl(node, &["-q", "add_vhost", &name]);
        cluster.ctl(
            node,
            &[
                "-q",
                "set_permissions",
                "-p",
                &name,
                "guest",
                ".*",
                ".*",
                ".*",
            ],
        );
        Self {
            name,
            host: Host::Cluster(cluster),
        }
    }

    /// The cluster this vhost is on, if it is.
    pub fn cluster(&self) -> Option<LocalCluster> {
        match self.host {
            Host::Default => None,
            Host::Cluster(cluster) => Some(cluster),
        }
    }

    /// `host:port` of every node, for `amqp.addresses`: empty on the default node.
    pub fn addresses(&self) -> Vec<String> {
        self.cluster()
            .map(LocalCluster::addresses)
            .unwrap_or_default()
    }

    /// `rabbitmqctl` on whichever node holds this vhost (a live one of the cluster).
    fn ctl(&self, args: &[&str]) -> String {
        self.host.ctl(args)
    }

    /// The AMQP URL of this vhost through `host` (RabbitMQ itself, or a proxy in front of it).
    pub fn url_via(&self, host: SocketAddr) -> String {
        format!("amqp://guest:guest@{host}/{}", self.name)
    }

    /// The AMQP URL of this vhost on the local broker (the cluster's first node for a vhost on
    /// the cluster: [`TestVhost::addresses`] names the others).
    pub fn url(&self) -> String {
        match self.host {
            Host::Default => self.url_via(SocketAddr::from(([127, 0, 0, 1], 5672))),
            Host::Cluster(cluster) => {
                format!("amqp://guest:guest@{}/{}", cluster.address(1), self.name)
            }
        }
    }

    /// Has the broker close every connection of this vhost, and only this vhost.
    pub async fn close_all_connections(&self) {
        let name = self.name.clone();
        let host = self.host;
        tokio::task::spawn_blocking(move || {
            host.ctl(&["close_all_connections", "--vhost", &name, "test"])
        })
        .await
        .expect("rabbitmqctl task");
    }

    /// The node (1-3) leading quorum queue `queue` of this vhost on the cluster.
    pub fn leader(&self, queue: &str) -> Option<usize> {
        self.list("list_queues", &["name", "leader"])
            .iter()
            .find(|q| q["name"] == queue)
            .and_then(|q| LocalCluster::node_of(q["leader"].as_str()?))
    }

    /// `rabbitmqctl <what> -p <vhost> <columns> --formatter json` (`what` as `list_consumers`),
    /// parsed; `arguments` columns become objects.
    pub fn list(&self, what: &str, columns: &[&str]) -> Vec<serde_json::Value> {
        let mut args = vec![what, "-p", &self.name, "--formatter", "json", "-q"];
        args.extend_from_slice(columns);
        let mut rows: Vec<serde_json::Value> =
            serde_json::from_str(&self.ctl(&args)).expect("rabbitmqctl prints JSON");
        // Arguments come as [name, type, value] triples: make them an object.
        for row in &mut rows {
            if let Some(triples) = row.get("arguments").and_then(|a| a.as_array()) {
                let object: serde_json::Map<_, _> = triples
                    .iter()
                    .filter_map(|t| Some((t.get(0)?.as_str()?.to_owned(), t.get(2)?.clone())))
                    .collect();
                row["arguments"] = object.into();
            }
        }
        rows
    }
}

impl Drop for TestVhost {
    fn drop(&mut self) {
        match self.host {
            Host::Default => {
                let _ = Command::new("rabbitmqctl")
                    .args(["delete_vhost", &self.name])
                    .output();
            }
            Host::Cluster(cluster) => {
                if let Some(node) = LocalCluster::NODES
                    .into_iter()
                    .find(|n| cluster.is_running(*n))
                {
                    let _ = Command::new(LocalCluster::script())
                        .args(["ctl", &node.to_string(), "delete_vhost", &self.name])
                        .output();
                }
            }
        }
    }
}

/// A fresh Ed25519 key pair for turn identities, also written as PEM files for services that load
/// their keys from settings.
#[derive(Debug)]
pub struct TurnKeys {
    private_pkcs8: Vec<u8>,
    public_raw: Vec<u8>,
    dir: PathBuf,
}

impl TurnKeys {
    /// Generates a key pair and writes `turn-identity.pem` and `turn-identity.pub.pem` to a fresh
    /// temporary directory.
    pub fn generate() -> Self {
        let pkcs8 =
            Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("generate an Ed25519 key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("read the generated key");
        let keys = Self {
            private_pkcs8: pkcs8.as_ref().to_vec(),
            public_raw: pair.public_key().as_ref().to_vec(),
            dir: std::env::temp_dir().join(format!("rover-keys-{}", uuid::Uuid::new_v4())),
        };
        std::fs::create_dir_all(&keys.dir).expect("create the key directory");
        std::fs::write(
            keys.private_key_file(),
            pem("PRIVATE KEY", &keys.private_pkcs8),
        )
        .expect("write the private key");
        let mut spki = vec![
            0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
        ];
        spki.extend_from_slice(&keys.public_raw);
        std::fs::write(keys.public_key_file(), pem("PUBLIC KEY", &spki))
            .expect("write the public key");
        keys
    }

    /// The private key as PEM on disk (what the gateway loads).
    pub fn private_key_file(&self) -> PathBuf {
        self.dir.join("turn-identity.pem")
    }

    /// The public key as PEM on disk (what the tool server loads).
    pub fn public_key_file(&self) -> PathBuf {
        self.dir.join("turn-identity.pub.pem")
    }

    /// A signer holding the private key.
    pub fn signer(&self) -> TurnSigner {
        TurnSigner::from_pkcs8_der(&self.private_pkcs8)
    }

    /// A verifier holding the public key.
    pub fn verifier(&self) -> TurnVerifier {
        TurnVerifier::from_public_key_bytes(&self.public_raw, chrono::Duration::hours(1))
    }

    /// The directory holding both files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TurnKeys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// A minimal HTTP/1.1 GET over a fresh connection: `(status, body)`. Enough for probes and
/// metrics endpoints without pulling an HTTP client into every test suite.
pub async fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

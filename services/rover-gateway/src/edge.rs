//! The HTTP edge every request crosses before any route: which `Host` it may name, how long it may
//! take to send its headers and body, how many connections one client and everyone together may
//! hold, and the headers every response carries.
//!
//! - **Host allow-list** ([`check_host`]): DNS rebinding turns any web page into a client of a
//!   gateway on a private address; a request naming a host not on `http.allowed_hosts` is refused
//!   (403) on every route — `/mcp`, `/api/dev/token`, the console — except the health probes,
//!   which the kubelet calls by pod address.
//! - **Slow clients** ([`serve`]): the request head must arrive within `http.header_read_timeout_ms`,
//!   a connection moving no byte either way is closed after `http.idle_timeout_ms` (an unused
//!   keep-alive connection, or one that never sends a request), a request body must arrive within
//!   `http.body_read_timeout_ms` (408), and connections beyond `http.max_connections` in all or
//!   `http.max_connections_per_client` from one address are closed at accept.
//! - **Response headers** ([`security_headers`]): the console may not be framed
//!   (`X-Frame-Options`, CSP `frame-ancestors 'none'`) and runs only its own scripts.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use rover_contracts::ErrorCode;
use tower::ServiceExt as _;

use crate::error::ApiError;
use crate::limits::TrustedProxies;

/// The `Host` values every route accepts: `http.allowed_hosts`, else `mcp.allowed_hosts`, else the
/// host of `mcp.public_url`, else the loopback names. An entry without a port matches any port;
/// `*` accepts any host (only behind a proxy that checks it).
pub(crate) fn allowed_hosts(settings: &crate::settings::Settings) -> Vec<String> {
    if !settings.http.allowed_hosts.is_empty() {
        return settings.http.allowed_hosts.clone();
    }
    if !settings.mcp.allowed_hosts.is_empty() {
        return settings.mcp.allowed_hosts.clone();
    }
    let public_host = settings
        .mcp
        .public_url
        .as_deref()
        .and_then(|url| url.parse::<axum::http::Uri>().ok())
        .and_then(|uri| uri.authority().map(|a| a.as_str().to_owned()));
    match public_host {
        Some(host) => vec![host],
        None => ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec(),
    }
}

/// Whether `host` (a `Host` header value) is on `allowed`.
pub(crate) fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = match host.rsplit_once(':') {
        // `[::1]:8080`, `example.org:8080`; a bare IPv6 address has more than one colon.
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !name.ends_with(':') => {
            name
        }
        _ => host.as_str(),
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    allowed.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        entry == "*" || entry == host || entry.trim_start_matches('[').trim_end_matches(']') == name
    })
}

/// Middleware: refuses a request whose `Host` is not allowed (403), except the health probes.
pub(crate) async fn check_host(
    State(allowed): State<Arc<Vec<String>>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if path == "/healthz" || path == "/readyz" {
        return next.run(request).await;
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(axum::http::uri::Authority::as_str)
        })
        .unwrap_or_default();
    if host_allowed(&allowed, host) {
        return next.run(request).await;
    }
    let shown: String = host.chars().take(64).collect();
    tracing::warn!(host = %shown, path, "request for a host not on http.allowed_hosts refused");
    ApiError::new(
        ErrorCode::PermissionDenied,
        "This gateway does not serve that host name (http.allowed_hosts).",
    )
    .into_response()
}

/// Middleware: every response may not be framed and runs only the gateway's own scripts.
pub(crate) async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Middleware: a request body must arrive whole within `limit` (408 otherwise), so a client
/// cannot hold a request open by sending its body a byte at a time. Bodies are buffered (they are
/// bounded by `http.body_limit_bytes`, and every endpoint reads them whole anyway).
pub(crate) async fn body_deadline(
    State(limit): State<(Duration, usize)>,
    request: Request,
    next: Next,
) -> Response {
    let (deadline, max) = limit;
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, max)).await {
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, bytes.into())).await,
        Ok(Err(_)) => ApiError::new(
            ErrorCode::TooLarge,
            format!("The request body is over {max} bytes."),
        )
        .into_response(),
        Err(_) => {
            tracing::warn!(path = parts.uri.path(), "request body not sent in time");
            let mut response = ApiError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "The request body did not arrive within {} ms.",
                    deadline.as_millis()
                ),
            )
            .into_response();
            *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
            response
        }
    }
}

/// A connection that is closed when no byte moves either way for `idle`: a client that connects
/// and sends nothing, or leaves a keep-alive connection unused, gives its socket back. A stream
/// is never idle this long (its keep-alive comments are written more often: `chat.keepalive_ms`).
struct IdleIo {
    inner: tokio::net::TcpStream,
    idle: Duration,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl IdleIo {
    fn new(inner: tokio::net::TcpStream, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }

    fn moved(&mut self) {
        let next = tokio::time::Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    /// A write's result, counted as movement when it wrote something.
    fn wrote(
        &mut self,
        written: std::task::Poll<std::io::Result<usize>>,
    ) -> std::task::Poll<std::io::Result<usize>> {
        if let std::task::Poll::Ready(Ok(n)) = written
            && n > 0
        {
            self.moved();
        }
        written
    }

    /// `Pending` from the socket: an error instead once the connection has been idle too long.
    fn check_idle(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.deadline.as_mut().poll(cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the connection was idle too long",
            ))),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl tokio::io::AsyncRead for IdleIo {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match std::pin::Pin::new(&mut self.inner).poll_read(cx, buf) {
            std::task::Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.moved();
                }
                std::task::Poll::Ready(Ok(()))
            }
            std::task::Poll::Pending => self.check_idle(cx),
            ready => ready,
        }
    }
}

impl tokio::io::AsyncWrite for IdleIo {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let written = std::pin::Pin::new(&mut self.inner).poll_write(cx, data);
        self.wrote(written)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let written = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// How many connections are open, in all and per client address.
#[derive(Debug)]
struct Connections {
    max: usize,
    per_client: usize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One open connection; counted until dropped.
struct Counted {
    connections: Arc<Connections>,
    client: Option<IpAddr>,
}

impl Connections {
    /// Counts a new connection from `peer` (not per address for a trusted proxy), or `None`
    /// when a cap is reached.
    fn admit(self: &Arc<Self>, peer: IpAddr, proxies: &TrustedProxies) -> Option<Counted> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if self.max > 0 && open.0 >= self.max {
            return None;
        }
        let client = (!proxies.trusts(peer)).then_some(peer);
        if let Some(client) = client {
            let count = open.1.entry(client).or_default();
            if self.per_client > 0 && *count >= self.per_client {
                return None;
            }
            *count += 1;
        }
        open.0 += 1;
        Some(Counted {
            connections: Arc::clone(self),
            client,
        })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut open = self
            .connections
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.0 = open.0.saturating_sub(1);
        if let Some(client) = self.client
            && let Some(count) = open.1.get_mut(&client)
        {
            *count -= 1;
            if *count == 0 {
                open.1.remove(&client);
            }
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and lets open
/// requests finish (the caller bounds how long). Every connection gets `TCP_NODELAY` (stream
/// chunks are small writes that Nagle's algorithm would hold back), the header-read timeout and
/// the connection caps; each request gets its peer address as `ConnectInfo`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    settings: crate::settings::GatewayHttp,
    proxies: TrustedProxies,
    shutdown: impl Future<Output = ()> + Send,
) {
    let connections = Arc::new(Connections {
        max: settings.max_connections,
        per_client: settings.max_connections_per_client,
        open: Mutex::default(),
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(settings.header_read_timeout_ms));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait a moment rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(counted) = connections.admit(peer.ip(), &proxies) else {
            tracing::debug!(%peer, "connection refused: at the connection cap");
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let service =
            router
                .clone()
                .map_request(move |mut request: Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(ConnectInfo(peer));
                    request.map(axum::body::Body::new)
                });
        let service = hyper_util::service::TowerToHyperService::new(
            service.map_err(|never: Infallible| match never {}),
        );
        let io = IdleIo::new(tcp, Duration::from_millis(settings.idle_timeout_ms));
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, error = %error, "connection ended with an error");
            }
            drop(counted);
        });
    }
    tracing::info!("draining: no new connections; open streams may finish");
    drop(listener);
    graceful.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_capped_in_all_and_per_address_but_not_per_trusted_proxy() {
        let ip = |last: u8| IpAddr::from([10, 0, 0, last]);
        let proxies = TrustedProxies::parse(&["10.0.0.9".to_owned()]).unwrap();
        let connections = Arc::new(Connections {
            max: 4,
            per_client: 2,
            open: Mutex::default(),
        });
        let a1 = connections.admit(ip(1), &proxies).expect("first");
        let _a2 = connections.admit(ip(1), &proxies).expect("second");
        assert!(connections.admit(ip(1), &proxies).is_none(), "per address");
        let _p1 = connections.admit(ip(9), &proxies).expect("a proxy");
        let _p2 = connections
            .admit(ip(9), &proxies)
            .expect("a proxy, over the per-address cap");
        assert!(connections.admit(ip(2), &proxies).is_none(), "in all");
        drop(a1);
        assert!(
            connections.admit(ip(2), &proxies).is_some(),
            "a closed one frees its place"
        );
        let unlimited = Arc::new(Connections {
            max: 0,
            per_client: 0,
            open: Mutex::default(),
        });
        let held: Vec<_> = (0..100).map(|_| unlimited.admit(ip(1), &proxies)).collect();
        assert!(held.iter().all(Option::is_some), "0 means no cap");
    }

    #[test]
    fn allowed_hosts_follow_the_settings() {
        let mut settings = crate::settings::Settings::default();
        assert_eq!(allowed_hosts(&settings), ["localhost", "127.0.0.1", "::1"]);
        settings.mcp.public_url = Some("https://rover.example.org".to_owned());
        assert_eq!(allowed_hosts(&settings), ["rover.example.org"]);
        settings.mcp.allowed_hosts = vec!["a.example".to_owned()];
        assert_eq!(allowed_hosts(&settings), ["a.example"]);
        settings.http.allowed_hosts = vec!["b.example".to_owned()];
        assert_eq!(allowed_hosts(&settings), ["b.example"]);
    }

    #[test]
    fn hosts_match_with_or_without_a_port() {
        let allowed = allowed_hosts(&crate::settings::Settings::default());
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1:1",
            "[::1]:8080",
            "::1",
        ] {
            assert!(host_allowed(&allowed, host), "{host}");
        }
        for host in [
            "rebind.attacker.example",
            "localhost.attacker.example",
            "127.0.0.1.nip.io:8080",
            "",
            "[::2]:80",
        ] {
            assert!(!host_allowed(&allowed, host), "{host}");
        }
        let pinned = vec!["rover.example.org:443".to_owned()];
        assert!(host_allowed(&pinned, "rover.example.org:443"));
        assert!(!host_allowed(&pinned, "rover.example.org:8443"));
        assert!(host_allowed(&["*".to_owned()], "anything.example"));
    }
}

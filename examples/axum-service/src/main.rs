//! A small HTTP service on tokio and axum, instrumented with `tracing` and `log` only (no
//! ust API but the two lines that install ust's `tracing` layer and `log` bridge), that
//! serves a batch of requests from its own clients and exits, so that `ust trace` can
//! trace a whole run:
//!
//! ```text
//! ust trace -t vtid -t procname --kernel --output /tmp/axum -- ./axum-service 40
//! ust export /tmp/axum -o /tmp/axum.pftrace    # open in Perfetto UI
//! ust report /tmp/axum --flamegraph /tmp/axum.svg
//! ```
//!
//! Usage: `axum-service [REQUESTS]` (default 40): a server on an ephemeral port of
//! 127.0.0.1 with `/items/{id}` (an `#[instrument]`ed async handler whose span records
//! the response size later with `Span::record`, and which awaits the [`store`] module, a
//! "dependency" that logs with `log` and sleeps 1–3 ms as a database would) and `/health`,
//! and four client tasks sending REQUESTS requests in all, each in its own span, over plain
//! HTTP/1.1 on tokio's `TcpStream`. Two worker threads; they poll the handlers' futures
//! in turn, so one request's span shows on both threads' tracks.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::Path;
use axum::routing::get;
use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The "database": what a library the service depends on does, logging with `log`.
mod store {
    use std::time::Duration;

    /// Looks an item up: 1 to 3 ms of waiting, as on a database.
    pub async fn lookup(id: u64) -> String {
        log::debug!(target: "store::pool", "connection taken for item {id}");
        tokio::time::sleep(Duration::from_millis(1 + id % 3)).await;
        if id % 10 == 7 {
            log::warn!("item {id} is stale, served anyway");
        }
        format!("{{\"id\":{id},\"name\":\"item-{id}\"}}")
    }
}

/// `GET /items/{id}`.
#[tracing::instrument(fields(bytes = tracing::field::Empty))]
async fn item(Path(id): Path<u64>) -> String {
    let body = store::lookup(id).await;
    tracing::Span::current().record("bytes", body.len() as u64);
    tracing::info!(id, "served");
    body
}

/// `GET /health`.
async fn health() -> &'static str {
    "ok"
}

/// One request over a new connection; returns the status line.
async fn request(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).await?;
    let text = String::from_utf8_lossy(&reply);
    Ok(text.lines().next().unwrap_or_default().to_string())
}

/// Client `c`: `n` requests, one after the other.
async fn client(addr: SocketAddr, c: u64, n: u64) -> u64 {
    let mut ok = 0;
    for i in 0..n {
        let id = c * 100 + i;
        let path = if i % 5 == 4 { "/health".to_string() } else { format!("/items/{id}") };
        let status = request(addr, &path).instrument(tracing::info_span!("request", client = c, path = path.as_str())).await;
        match status {
            Ok(s) if s.contains(" 200 ") => ok += 1,
            Ok(s) => tracing::warn!(client = c, status = s.as_str(), "unexpected reply"),
            Err(e) => tracing::error!(client = c, error = %e, "request failed"),
        }
    }
    ok
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::registry().with(ust::tracing::layer()).init();
    ust::log::init().expect("no other logger installed");
    let total: u64 = std::env::args().nth(1).map_or(40, |s| s.parse().expect("REQUESTS: a number"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    log::info!("listening on {addr}");
    let app = Router::new().route("/items/{id}", get(item)).route("/health", get(health));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });
    let clients: Vec<_> = (0..4).map(|c| tokio::spawn(client(addr, c, total / 4 + u64::from(c < total % 4)))).collect();
    let mut ok = 0;
    for c in clients {
        ok += c.await.unwrap_or(0);
    }
    let _ = stop.send(());
    server.await.expect("the server task")?;
    tokio::time::sleep(Duration::from_millis(1)).await;
    println!("{ok} of {total} requests answered 200");
    Ok(())
}

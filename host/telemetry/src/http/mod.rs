//! refract's operational HTTP endpoint: hyper's HTTP/1 server on a current-thread tokio runtime
//! that runs on a thread of its own, so nothing the mirror does can delay it.
//!
//! | request | success | failure |
//! |---|---|---|
//! | `GET /metrics` | 200 `text/plain; version=0.0.4` | 503 with `Retry-After` (handlers busy) |
//! | `GET /health` | 200 | 503 (unhealthy) |
//! | `POST /reload` | 200 | 401 (token missing or wrong), 403 ([`ReloadAccess::Closed`]), 404 (`reload = false`), 409 (rejected, old config kept; or a reload already running) |
//! | `GET /status` | 200 `application/json` | 503 with `Retry-After` (handlers busy) |
//!
//! Any other path is 404, another method on a known path 405, a request from a browser page of
//! another origin (an `Origin` header that is not this endpoint) or for a host name not allowed
//! (DNS rebinding) 403, a body over 64 KiB 413, a malformed request 400, a head over 64 KiB 431.
//! A handler that panics yields 500, one that does not answer in time 503. Every response closes
//! the connection.
//!
//! Why it is built this way: Kubernetes restarts a mirror whose `/health` does not answer, so
//! no client may take the endpoint's capacity from a probe.
//! - A connection has [`REQUEST_TIMEOUT`] to send its whole request (TLS handshake, head and
//!   body); then it is closed.
//! - At most [`MAX_CONNECTIONS`] are open. One more evicts the oldest connection that is still
//!   sending its request or receiving its response; only when every connection is being
//!   answered is the newcomer closed unanswered. Idle and slow clients therefore never keep
//!   a probe out.
//! - `/health` is answered on the endpoint's own thread from the health a thread of its own
//!   reads when a probe asks (`health.rs`), waiting at most [`FRESH_WAIT`] for a fresh reading:
//!   it needs no handler thread, no place in a queue and no lock a reload holds.
//! - `/metrics` and `/status` run on [`HANDLER_THREADS`] threads behind a queue of at most
//!   [`HANDLER_QUEUE`] requests (`pool.rs`), with [`HANDLER_TIMEOUT`]; a request that finds the
//!   queue full is answered 503 with `Retry-After` at once, and a queued one whose client is
//!   gone never runs. A reload runs on a thread of its own, one at a time, with
//!   [`RELOAD_TIMEOUT`]. So at most `HANDLER_THREADS + HANDLER_QUEUE + 1` connections are being
//!   answered at once, and the rest of [`MAX_CONNECTIONS`] ([`PROBE_SLOTS`]) can always be
//!   freed for a probe by the eviction above.
//! - The response must be written within [`WRITE_TIMEOUT`].

mod access;
mod connections;
mod health;
mod pool;
mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;

use access::Access;
use connections::{Connection, Connections, Phase};
use health::Health;
pub use health::{FRESH_WAIT, HEALTH_REFRESH};
use pool::Pool;
pub use tls::TlsFiles;

/// Largest accepted request head, and largest accepted body.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// Time a client has to send its whole request (with TLS, the handshake too).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Time `/metrics` and `/status` have to answer, waiting in the queue included; a health
/// reading older than this is not trusted.
pub const HANDLER_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a reload has to finish before `POST /reload` answers 503 (the reload goes on; the log
/// and `/status` tell how it ended).
pub const RELOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// Time a client has to receive the response.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections open at once; one more evicts the oldest idle or slow one.
pub const MAX_CONNECTIONS: usize = 512;
/// Threads answering `/metrics` and `/status` at once.
pub const HANDLER_THREADS: usize = 4;
/// `/metrics` and `/status` requests that may wait for a handler thread; one more is 503.
pub const HANDLER_QUEUE: usize = 16;
/// Connections that are never being answered at once, so the eviction can always free one for
/// a probe: all but the handler threads, their queue and the one reload.
pub const PROBE_SLOTS: usize = MAX_CONNECTIONS - (HANDLER_THREADS + HANDLER_QUEUE + 1);
const _: () = assert!(PROBE_SLOTS >= MAX_CONNECTIONS / 2);
/// What a 503 from a full queue asks the client to wait, in seconds.
const RETRY_AFTER: &str = "1";

/// What the endpoints answer; implemented by the process that owns the mirror. Every method is
/// called on a thread of the endpoint's, never on the mirror's.
pub trait Endpoints: Send + Sync {
    /// The metrics exposition (Prometheus text format 0.0.4).
    fn metrics(&self) -> String;
    /// Whether the process is healthy, and a human-readable body explaining it.
    fn health(&self) -> (bool, String);
    /// Reloads the configuration: whether it was applied, and a body saying what happened.
    /// `detailed` is true only for a caller that presented the reload token: anyone else gets
    /// no error chain (file names, settings), only the outcome.
    fn reload(&self, detailed: bool) -> (bool, String);
    /// The running state as a JSON document.
    fn status(&self) -> String;
}

/// Who may `POST /reload`.
#[derive(Clone, Default)]
pub enum ReloadAccess {
    /// Nobody: `/reload` is 404.
    Disabled,
    /// Anyone who can reach the endpoint (browser pages of other origins excepted).
    #[default]
    Open,
    /// Only a request with `Authorization: Bearer <token>`.
    Token(String),
    /// Nobody, because nobody was named: the endpoint listens where other hosts can reach it
    /// and the configuration set neither a token nor `reload = true`. `/reload` is 403, saying
    /// which setting opens it.
    Closed,
}

impl std::fmt::Debug for ReloadAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReloadAccess::Disabled => "Disabled",
            ReloadAccess::Open => "Open",
            ReloadAccess::Token(_) => "Token(***)",
            ReloadAccess::Closed => "Closed",
        })
    }
}

/// How the endpoint is served beyond its address.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Who may reload.
    pub reload: ReloadAccess,
    /// Serve HTTPS with these files (re-read when they change).
    pub tls: Option<TlsFiles>,
    /// Host names requests may name besides IP addresses and `localhost` (a Service name a
    /// scraper uses, say). Anything else is refused: a web page cannot read the endpoint through
    /// a name of its own that resolves to it (DNS rebinding).
    pub allowed_hosts: Vec<String>,
}

/// Why the HTTP server could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The listen address could not be bound.
    #[error("cannot listen for HTTP on `{listen}`: {source} (use host:port, e.g. 127.0.0.1:9090, on a free port)")]
    Bind {
        /// The configured address.
        listen: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The endpoint's thread or runtime could not be started.
    #[error("cannot start the HTTP endpoint for `{listen}`: {source}")]
    Start {
        /// The configured address.
        listen: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS certificate or key could not be used.
    #[error("cannot serve HTTPS on `{listen}`: {reason}")]
    Tls {
        /// The configured address.
        listen: String,
        /// What is wrong, naming the file.
        reason: String,
    },
}

/// A running HTTP server; stops on [`shutdown`](Server::shutdown) or drop.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    https: bool,
    stop: Option<oneshot::Sender<()>>,
    /// Ends with how many of the endpoint's threads were left running.
    thread: Option<JoinHandle<usize>>,
}

impl Server {
    /// The address actually bound (with the real port when `listen` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint's base URL, `http://…` or `https://…`.
    pub fn url(&self) -> String {
        format!(
            "{}://{}",
            if self.https { "https" } else { "http" },
            self.addr
        )
    }

    /// Stops accepting and closes every connection; waits for the endpoint's thread to end.
    /// A handler still answering is given a second to finish; returns how many of the
    /// endpoint's threads (handlers, the health reader) were still busy then and were left to
    /// end on their own (each time also logged). Normally 0.
    pub fn shutdown(mut self) -> usize {
        self.stop_serving()
    }

    fn stop_serving(&mut self) -> usize {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(thread) => thread.join().unwrap_or(0),
            None => 0,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop_serving();
    }
}

/// What every connection of one server shares.
struct Shared {
    handler: Arc<dyn Endpoints>,
    /// The last health reading, kept fresh by a thread of its own.
    health: Health,
    /// The threads and queue of `/metrics` and `/status`.
    pool: Pool,
    access: Access,
    connections: Connections,
    /// A reload is running (they run one at a time).
    reloading: Arc<AtomicBool>,
}

/// Binds `listen` (`host:port`; port 0 picks a free one) and serves the endpoints of `handler`
/// on a thread of its own until the returned [`Server`] is shut down or dropped.
pub fn serve(
    listen: &str,
    handler: Arc<dyn Endpoints>,
    options: Options,
) -> Result<Server, HttpError> {
    let start_error = |source| HttpError::Start {
        listen: listen.to_owned(),
        source,
    };
    let bind_error = |source| HttpError::Bind {
        listen: listen.to_owned(),
        source,
    };
    let tls = match &options.tls {
        Some(files) => Some(
            tls::Tls::load(files.clone()).map_err(|reason| HttpError::Tls {
                listen: listen.to_owned(),
                reason,
            })?,
        ),
        None => None,
    };
    let listener = std::net::TcpListener::bind(listen).map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(start_error)?;
    let https = tls.is_some();
    let left_running = Arc::new(AtomicUsize::new(0));
    let shared = Arc::new(Shared {
        health: Health::start(Arc::clone(&handler), &left_running).map_err(start_error)?,
        pool: Pool::start(
            "refract-http-handler",
            HANDLER_THREADS,
            HANDLER_QUEUE,
            &left_running,
        )
        .map_err(start_error)?,
        handler,
        access: Access::new(&options, https),
        connections: Connections::new(MAX_CONNECTIONS),
        reloading: Arc::new(AtomicBool::new(false)),
    });
    let (stop, stopped) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("refract-http".into())
        .spawn(move || {
            runtime.block_on(accept_loop(listener, shared, tls, stopped));
            // Dropping the connections' tasks closes their sockets (a client waiting for its
            // answer, or yet to send its request, sees the connection close) and drops the
            // last `Shared`: the handler threads and the health reader are waited for briefly
            // (a stuck handler is not, and is counted).
            runtime.shutdown_background();
            left_running.load(Ordering::SeqCst)
        })
        .map_err(start_error)?;
    Ok(Server {
        addr,
        https,
        stop: Some(stop),
        thread: Some(thread),
    })
}

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    tls: Option<tls::Tls>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("HTTP endpoint: cannot register the listener: {e}");
            return;
        }
    };
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Usually transient (an aborted handshake, out of file descriptors): back off
                // briefly rather than spin.
                tracing::warn!("HTTP endpoint: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(connection) = shared.connections.admit() else {
            // Every connection is being answered: shed this one (dropping closes it).
            continue;
        };
        let acceptor = tls.as_ref().map(tls::Tls::acceptor);
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            match acceptor {
                None => serve_connection(stream, &connection, &shared).await,
                Some(acceptor) => {
                    if let Some(stream) = tls::handshake(&acceptor, stream, &connection).await {
                        serve_connection(stream, &connection, &shared).await;
                    }
                }
            }
            shared.connections.close(&connection);
        });
    }
}

/// Serves one request on `io`, within the connection's deadline, until it is answered, times
/// out or is evicted.
async fn serve_connection<I>(io: I, connection: &Arc<Connection>, shared: &Arc<Shared>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = {
        let connection = Arc::clone(connection);
        let shared = Arc::clone(shared);
        hyper::service::service_fn(move |request| {
            let connection = Arc::clone(&connection);
            let shared = Arc::clone(&shared);
            async move { Ok::<_, Infallible>(answer(request, &connection, &shared).await) }
        })
    };
    let http = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(MAX_REQUEST_BYTES)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(http);
    // Ends the connection when its deadline passes or it is evicted; the deadline moves when
    // the request is complete (to the handler's budget) and again when the answer is ready.
    tokio::select! {
        _ = &mut http => {}
        () = connection.expired() => {}
    }
}

/// A response with a text body.
fn text(status: StatusCode, body: impl Into<String>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.into())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A request refused before any handler runs: its status and why.
pub(super) struct Refusal {
    status: StatusCode,
    body: String,
    /// Ask for a bearer token (`WWW-Authenticate`).
    challenge: bool,
}

impl Refusal {
    fn new(status: StatusCode, body: impl Into<String>) -> Self {
        Self {
            status,
            body: body.into(),
            challenge: false,
        }
    }

    fn response(self) -> Response<Full<Bytes>> {
        let mut response = text(self.status, self.body);
        if self.challenge {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"refract\""),
            );
        }
        response
    }
}

/// Which endpoint a path is, and the one method it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endpoint {
    Metrics,
    Health,
    Reload,
    Status,
}

impl Endpoint {
    fn of(path: &str) -> Option<(Self, &'static str)> {
        Some(match path {
            "/metrics" => (Endpoint::Metrics, "GET"),
            "/health" => (Endpoint::Health, "GET"),
            "/reload" => (Endpoint::Reload, "POST"),
            "/status" => (Endpoint::Status, "GET"),
            _ => return None,
        })
    }
}

/// Checks, routes and answers one request.
async fn answer(
    request: Request<Incoming>,
    connection: &Connection,
    shared: &Shared,
) -> Response<Full<Bytes>> {
    let response = route(request, connection, shared).await;
    // The answer is ready: what is left is writing it.
    connection.enter(Phase::Writing, WRITE_TIMEOUT);
    response
}

async fn route(
    request: Request<Incoming>,
    connection: &Connection,
    shared: &Shared,
) -> Response<Full<Bytes>> {
    if let Err(refused) = shared.access.check_request(request.headers()) {
        return refused.response();
    }
    let path = request.uri().path().to_owned();
    let Some((endpoint, method)) = Endpoint::of(&path) else {
        return text(
            StatusCode::NOT_FOUND,
            "not found: the endpoints are GET /metrics, GET /health, POST /reload, GET /status\n",
        );
    };
    if request.method().as_str() != method {
        let mut response = text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method not allowed: use {method} {path}\n"),
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(method));
        return response;
    }
    let detailed = if endpoint == Endpoint::Reload {
        match shared.access.check_reload(request.headers()) {
            Ok(detailed) => detailed,
            Err(refused) => return refused.response(),
        }
    } else {
        false
    };
    // No endpoint uses a body; it is read (bounded) so the connection closes cleanly.
    if let Err(refused) = read_body(request.into_body()).await {
        return refused.response();
    }
    let handler = Arc::clone(&shared.handler);
    let (content_type, body): (_, Box<dyn FnOnce() -> String + Send>) = match endpoint {
        Endpoint::Health => {
            let (status, body) = shared.health.answer().await;
            let mut response = Response::new(Full::new(body));
            *response.status_mut() = status;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return response;
        }
        Endpoint::Reload => {
            connection.enter(Phase::Handling, RELOAD_TIMEOUT);
            return reload(handler, detailed, &shared.reloading).await;
        }
        Endpoint::Metrics => (
            "text/plain; version=0.0.4; charset=utf-8",
            Box::new(move || handler.metrics()),
        ),
        Endpoint::Status => ("application/json", Box::new(move || handler.status())),
    };
    connection.enter(Phase::Handling, HANDLER_TIMEOUT);
    call(&path, &shared.pool, content_type, body).await
}

/// A 503 that asks the client to come back after [`RETRY_AFTER`] seconds.
fn busy(body: String) -> Response<Full<Bytes>> {
    let mut response = text(StatusCode::SERVICE_UNAVAILABLE, body);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER));
    response
}

/// Reads and discards a body of at most [`MAX_REQUEST_BYTES`].
async fn read_body(body: Incoming) -> Result<(), Refusal> {
    use hyper::body::Body;
    let too_large = || {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request too large: at most {MAX_REQUEST_BYTES} bytes of body\n"),
        )
    };
    if body
        .size_hint()
        .exact()
        .is_some_and(|n| n > MAX_REQUEST_BYTES as u64)
    {
        return Err(too_large());
    }
    match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
        Ok(_) => Ok(()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(_) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "bad request: the body could not be read\n",
        )),
    }
}

/// Runs a handler on the pool within [`HANDLER_TIMEOUT`], its body served as `content_type`: a
/// full queue is 503 at once, a panic 500, no answer in time 503.
async fn call(
    path: &str,
    pool: &Pool,
    content_type: &'static str,
    body: Box<dyn FnOnce() -> String + Send>,
) -> Response<Full<Bytes>> {
    let job = Box::new(move || {
        let mut response = text(StatusCode::OK, body());
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    });
    let answer = match pool.submit(job) {
        Ok(answer) => answer,
        Err(pool::Refused::Full) => {
            return busy(format!(
                "busy: {HANDLER_THREADS} requests are being answered and {HANDLER_QUEUE} are waiting; retry {path} in {RETRY_AFTER} s\n"
            ))
        }
        Err(pool::Refused::Closed) => {
            return busy(format!("shutting down: {path} is not answered any more\n"))
        }
    };
    match tokio::time::timeout(HANDLER_TIMEOUT, answer).await {
        Ok(Ok(Some(response))) => response,
        Ok(Ok(None) | Err(_)) => {
            tracing::error!("HTTP endpoint: the {path} handler panicked");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal error: the {path} handler failed\n"),
            )
        }
        Err(_) => {
            tracing::warn!(
                "HTTP endpoint: the {path} handler did not answer within {HANDLER_TIMEOUT:?}"
            );
            busy(format!(
                "the {path} handler did not answer within {HANDLER_TIMEOUT:?}\n"
            ))
        }
    }
}

/// Clears the reload flag when a reload thread ends, however it ends.
struct ReloadRunning(Arc<AtomicBool>);

impl Drop for ReloadRunning {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Runs one reload on a thread of its own (never on the pool `/health` needs), one at a time.
async fn reload(
    handler: Arc<dyn Endpoints>,
    detailed: bool,
    reloading: &Arc<AtomicBool>,
) -> Response<Full<Bytes>> {
    if reloading.swap(true, Ordering::SeqCst) {
        return text(
            StatusCode::CONFLICT,
            "a reload is already running; try again when it has finished\n",
        );
    }
    let running = ReloadRunning(Arc::clone(reloading));
    let (done, result) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("refract-http-reload".into())
        .spawn(move || {
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler.reload(detailed)));
            // Finished before it is answered: a client that reloads again once answered is
            // never told that its own reload is still running.
            drop(running);
            let _ = done.send(outcome.ok());
        });
    if let Err(e) = spawned {
        tracing::error!("HTTP endpoint: cannot start a reload thread: {e}");
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error: cannot start the reload\n",
        );
    }
    match tokio::time::timeout(RELOAD_TIMEOUT, result).await {
        Ok(Ok(Some((applied, body)))) => {
            let status = if applied {
                StatusCode::OK
            } else {
                StatusCode::CONFLICT
            };
            text(status, body)
        }
        Ok(Ok(None) | Err(_)) => {
            tracing::error!("HTTP endpoint: the /reload handler panicked");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error: the /reload handler failed\n",
            )
        }
        Err(_) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the reload did not finish within {RELOAD_TIMEOUT:?}; it goes on: see the log and /status\n"
            ),
        ),
    }
}

/// The TLS files' paths, for [`Options::tls`].
impl TlsFiles {
    /// Files at `cert` (PEM chain, leaf first) and `key` (PEM private key).
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert: cert.into(),
            key: key.into(),
        }
    }
}

#[cfg(test)]
mod tests;

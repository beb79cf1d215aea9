//! A minimal HTTP/1.1 server for refract's operational endpoints, on `std::net` only:
//!
//! | request | success | failure |
//! |---|---|---|
//! | `GET /metrics` | 200 `text/plain; version=0.0.4` | |
//! | `GET /health` | 200 | 503 (unhealthy) |
//! | `POST /reload` | 200 | 409 (reload rejected, old config kept), 500 (handler panicked) |
//! | `GET /status` | 200 `application/json` | |
//!
//! Any other path is 404, another method on a known path 405, a malformed request 400, a
//! request (head plus body) over 64 KiB 413, a chunked body 411, a request not complete within
//! 2 s 408. Every response closes the connection. A handler that panics yields 500.
//!
//! One thread accepts; each connection is served on its own short-lived thread (at most 32 at
//! once, further connections are closed unanswered), so a slow client cannot block a scrape.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest accepted request, head and body together.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// Time a client has to send its whole request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once; more are closed without an answer.
const MAX_CONNECTIONS: usize = 32;
/// Time allowed for writing a response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// Time spent draining unread request bytes before closing, so the client sees the response
/// instead of a connection reset.
const LINGER: Duration = Duration::from_millis(500);

/// What the endpoints answer; implemented by the process that owns the mirror.
pub trait Endpoints: Send + Sync {
    /// The metrics exposition (Prometheus text format 0.0.4).
    fn metrics(&self) -> String;
    /// Whether the process is healthy, and a human-readable body explaining it.
    fn health(&self) -> (bool, String);
    /// Reloads the configuration: whether it was applied, and a body saying what happened.
    fn reload(&self) -> (bool, String);
    /// The running state as a JSON document.
    fn status(&self) -> String;
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
        source: io::Error,
    },
    /// The accept thread could not be started.
    #[error("cannot start the HTTP accept thread for `{listen}`: {source}")]
    Spawn {
        /// The configured address.
        listen: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// A running HTTP server; stops accepting on [`shutdown`](Server::shutdown) or drop.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// The address actually bound (with the real port when `listen` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections and waits for the accept thread to end. Connections
    /// already accepted finish on their own threads (bounded by the request/write timeouts).
    pub fn shutdown(mut self) {
        self.stop_accepting();
    }

    fn stop_accepting(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a connection of our own. If even that fails, leave
        // the thread detached: it exits at its next connection, and joining would hang.
        if TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_secs(1)).is_ok() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_accepting();
    }
}

/// Where to connect to reach a listener bound to `addr` (loopback for a wildcard address).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

/// Binds `listen` (`host:port`; port 0 picks a free one) and serves the endpoints of `handler`
/// on a background thread until the returned [`Server`] is shut down or dropped.
pub fn serve(listen: &str, handler: Arc<dyn Endpoints>) -> Result<Server, HttpError> {
    let bind_error = |source| HttpError::Bind {
        listen: listen.to_owned(),
        source,
    };
    let listener = TcpListener::bind(listen).map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let stop = Arc::new(AtomicBool::new(false));
    let thread = std::thread::Builder::new()
        .name("refract-http".into())
        .spawn({
            let stop = Arc::clone(&stop);
            move || accept_loop(&listener, &stop, &handler)
        })
        .map_err(|source| HttpError::Spawn {
            listen: listen.to_owned(),
            source,
        })?;
    Ok(Server {
        addr,
        stop,
        thread: Some(thread),
    })
}

fn accept_loop(listener: &TcpListener, stop: &AtomicBool, handler: &Arc<dyn Endpoints>) {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let accepted = listener.accept();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match accepted {
            Ok((stream, _)) => dispatch(stream, handler, &active),
            Err(e) => {
                // Usually transient (aborted handshake, out of file descriptors): back off
                // briefly rather than spin.
                tracing::warn!("HTTP endpoint: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Decrements the active-connection count when a connection thread ends, however it ends.
struct ActiveGuard(Arc<AtomicUsize>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn dispatch(stream: TcpStream, handler: &Arc<dyn Endpoints>, active: &Arc<AtomicUsize>) {
    if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
        active.fetch_sub(1, Ordering::SeqCst);
        return; // dropping the stream closes it
    }
    let guard = ActiveGuard(Arc::clone(active));
    let handler = Arc::clone(handler);
    let spawned = std::thread::Builder::new()
        .name("refract-http-conn".into())
        .spawn(move || {
            let _guard = guard;
            handle_connection(stream, handler.as_ref());
        });
    if let Err(e) = spawned {
        tracing::warn!("HTTP endpoint: cannot start a connection thread: {e}");
    }
}

/// An HTTP response about to be written.
struct Response {
    status: u16,
    content_type: &'static str,
    allow: Option<&'static str>,
    body: String,
}

const TEXT: &str = "text/plain; charset=utf-8";

impl Response {
    fn text(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type: TEXT,
            allow: None,
            body: body.into(),
        }
    }

    fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        if let Some(allow) = self.allow {
            head.push_str("Allow: ");
            head.push_str(allow);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        out.write_all(head.as_bytes())?;
        out.write_all(self.body.as_bytes())?;
        out.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

fn handle_connection(mut stream: TcpStream, handler: &dyn Endpoints) {
    let response = match read_request(&mut stream) {
        Ok(request) => route(&request, handler),
        Err(RequestError::Closed) => return,
        Err(RequestError::Respond(response)) => response,
    };
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    if response.write_to(&mut stream).is_err() {
        return;
    }
    linger(stream);
}

/// Half-closes and reads what the client still sends (briefly), so closing with unread bytes
/// does not reset the connection before the client has read the response.
fn linger(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The parts of a request the router needs.
#[derive(Debug)]
struct Request {
    method: String,
    path: String,
}

enum RequestError {
    /// The client went away before sending anything: nothing to answer.
    Closed,
    /// Answer with this error response.
    Respond(Response),
}

fn respond(status: u16, body: &str) -> RequestError {
    RequestError::Respond(Response::text(status, format!("{body}\n")))
}

/// Reads one request's head and discards its body, within [`REQUEST_TIMEOUT`] overall and
/// [`MAX_REQUEST_BYTES`] in total.
fn read_request(stream: &mut TcpStream) -> Result<Request, RequestError> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_len = loop {
        if let Some(end) = head_end(&buf) {
            break end;
        }
        if buf.len() >= MAX_REQUEST_BYTES {
            return Err(too_large());
        }
        let room = (MAX_REQUEST_BYTES - buf.len()).min(chunk.len());
        match read_some(stream, &mut chunk[..room], deadline)? {
            0 if buf.is_empty() => return Err(RequestError::Closed),
            0 => return Err(respond(400, "bad request: connection closed mid-request")),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = std::str::from_utf8(&buf[..head_len])
        .map_err(|_| respond(400, "bad request: the request head is not UTF-8"))?;
    let (request, content_length) = parse_head(head)?;
    let total = head_len
        .checked_add(content_length)
        .filter(|&t| t <= MAX_REQUEST_BYTES)
        .ok_or_else(too_large)?;
    // The body is not used by any endpoint; read it so the connection closes cleanly.
    let mut have = buf.len();
    while have < total {
        let room = (total - have).min(chunk.len());
        match read_some(stream, &mut chunk[..room], deadline)? {
            0 => return Err(respond(400, "bad request: connection closed mid-body")),
            n => have += n,
        }
    }
    Ok(request)
}

fn too_large() -> RequestError {
    respond(
        413,
        &format!("request too large: at most {MAX_REQUEST_BYTES} bytes of head and body"),
    )
}

/// One `read`, with the time left until `deadline` as its timeout.
fn read_some(
    stream: &mut TcpStream,
    into: &mut [u8],
    deadline: Instant,
) -> Result<usize, RequestError> {
    let timed_out = || {
        respond(
            408,
            "request timeout: send the whole request within 2 seconds",
        )
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|_| RequestError::Closed)?;
        match stream.read(into) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(timed_out())
            }
            Err(_) => return Err(RequestError::Closed),
        }
    }
}

/// Length of the head including its terminating blank line (CRLF or bare LF line endings).
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.iter().enumerate().find_map(|(i, &b)| {
        if b != b'\n' {
            return None;
        }
        match &buf[i + 1..] {
            [b'\n', ..] => Some(i + 2),
            [b'\r', b'\n', ..] => Some(i + 3),
            _ => None,
        }
    })
}

/// Parses the request line and the headers that matter: `Content-Length` and
/// `Transfer-Encoding`.
fn parse_head(head: &str) -> Result<(Request, usize), RequestError> {
    let mut lines = head.lines().map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(respond(
            400,
            "bad request: expected `METHOD /path HTTP/1.1`",
        ));
    };
    if method.is_empty() || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Err(respond(
            400,
            "bad request: expected `METHOD /path HTTP/1.1`",
        ));
    }
    let mut content_length: Option<usize> = None;
    for line in lines.take_while(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(respond(400, "bad request: header line without `:`"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .parse()
                .map_err(|_| respond(400, "bad request: Content-Length is not a number"))?;
            if content_length.is_some_and(|prev| prev != n) {
                return Err(respond(
                    400,
                    "bad request: conflicting Content-Length headers",
                ));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(respond(
                411,
                "length required: chunked request bodies are not supported, send Content-Length",
            ));
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    Ok((
        Request {
            method: method.to_owned(),
            path: path.to_owned(),
        },
        content_length.unwrap_or(0),
    ))
}

/// Which endpoint a path is, and the one method it accepts.
#[derive(Clone, Copy)]
enum Endpoint {
    Metrics,
    Health,
    Reload,
    Status,
}

fn route(request: &Request, handler: &dyn Endpoints) -> Response {
    let (endpoint, method) = match request.path.as_str() {
        "/metrics" => (Endpoint::Metrics, "GET"),
        "/health" => (Endpoint::Health, "GET"),
        "/reload" => (Endpoint::Reload, "POST"),
        "/status" => (Endpoint::Status, "GET"),
        _ => return Response::text(
            404,
            "not found: the endpoints are GET /metrics, GET /health, POST /reload, GET /status\n",
        ),
    };
    if request.method != method {
        let mut response = Response::text(
            405,
            format!("method not allowed: use {method} {}\n", request.path),
        );
        response.allow = Some(method);
        return response;
    }
    let called = catch_unwind(AssertUnwindSafe(|| call(endpoint, handler)));
    called.unwrap_or_else(|_| {
        tracing::error!("HTTP endpoint: the {} handler panicked", request.path);
        Response::text(
            500,
            format!("internal error: the {} handler failed\n", request.path),
        )
    })
}

fn call(endpoint: Endpoint, handler: &dyn Endpoints) -> Response {
    match endpoint {
        Endpoint::Metrics => Response {
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            ..Response::text(200, handler.metrics())
        },
        Endpoint::Health => {
            let (healthy, body) = handler.health();
            Response::text(if healthy { 200 } else { 503 }, body)
        }
        Endpoint::Reload => {
            let (applied, body) = handler.reload();
            Response::text(if applied { 200 } else { 409 }, body)
        }
        Endpoint::Status => Response {
            content_type: "application/json",
            ..Response::text(200, handler.status())
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[derive(Default)]
    struct Fake {
        unhealthy: AtomicBool,
        reject_reload: AtomicBool,
        reloads: AtomicU32,
        panic: AtomicBool,
    }

    impl Endpoints for Fake {
        fn metrics(&self) -> String {
            assert!(
                !self.panic.load(Ordering::SeqCst),
                "metrics handler panics on request"
            );
            "# TYPE up gauge\nup 1\n".into()
        }
        fn health(&self) -> (bool, String) {
            if self.unhealthy.load(Ordering::SeqCst) {
                (false, "flow a->b halted\n".into())
            } else {
                (true, "ok\n".into())
            }
        }
        fn reload(&self) -> (bool, String) {
            self.reloads.fetch_add(1, Ordering::SeqCst);
            if self.reject_reload.load(Ordering::SeqCst) {
                (
                    false,
                    "config.toml: flows[0].source: unknown cluster\n".into(),
                )
            } else {
                (true, "reloaded\n".into())
            }
        }
        fn status(&self) -> String {
            r#"{"flows":[]}"#.into()
        }
    }

    fn start() -> (Arc<Fake>, Server) {
        let fake = Arc::new(Fake::default());
        let server = serve("127.0.0.1:0", fake.clone()).unwrap();
        (fake, server)
    }

    struct Reply {
        status: u16,
        headers: String,
        body: String,
    }

    /// Sends `parts` as separate writes (to exercise partial reads) and reads the reply.
    fn exchange(server: &Server, parts: &[&[u8]]) -> Reply {
        let mut stream = TcpStream::connect(server.local_addr()).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                // Give the server a chance to read what came so far on its own.
                std::thread::sleep(Duration::from_millis(20));
            }
            stream.write_all(part).unwrap();
        }
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head[9..12].parse().unwrap();
        Reply {
            status,
            headers: head.to_owned(),
            body: body.to_owned(),
        }
    }

    fn get(server: &Server, method: &str, path: &str) -> Reply {
        let request = format!("{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        exchange(server, &[request.as_bytes()])
    }

    #[test]
    fn endpoints_answer_with_status_type_and_body() {
        let (fake, server) = start();
        assert_ne!(server.local_addr().port(), 0);
        let metrics = get(&server, "GET", "/metrics");
        assert_eq!(metrics.status, 200);
        assert!(metrics
            .headers
            .contains("Content-Type: text/plain; version=0.0.4"));
        assert!(metrics.headers.contains("Connection: close"));
        assert!(metrics.headers.contains("Content-Length: 21"));
        assert_eq!(metrics.body, "# TYPE up gauge\nup 1\n");
        // Query strings are ignored.
        assert_eq!(get(&server, "GET", "/metrics?name[]=up").status, 200);

        let health = get(&server, "GET", "/health");
        assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
        fake.unhealthy.store(true, Ordering::SeqCst);
        let health = get(&server, "GET", "/health");
        assert_eq!(
            (health.status, health.body.as_str()),
            (503, "flow a->b halted\n")
        );

        let status = get(&server, "GET", "/status");
        assert_eq!(
            (status.status, status.body.as_str()),
            (200, r#"{"flows":[]}"#)
        );
        assert!(status.headers.contains("Content-Type: application/json"));

        let reload = get(&server, "POST", "/reload");
        assert_eq!((reload.status, reload.body.as_str()), (200, "reloaded\n"));
        fake.reject_reload.store(true, Ordering::SeqCst);
        let reload = get(&server, "POST", "/reload");
        assert_eq!(reload.status, 409);
        assert!(reload.body.contains("unknown cluster"));
        assert_eq!(fake.reloads.load(Ordering::SeqCst), 2);
        server.shutdown();
    }

    #[test]
    fn unknown_paths_wrong_methods_and_bad_requests() {
        let (fake, server) = start();
        let cases = [
            ("GET", "/nope", 404, None),
            ("GET", "/", 404, None),
            ("POST", "/metrics", 405, Some("Allow: GET")),
            ("DELETE", "/health", 405, Some("Allow: GET")),
            ("GET", "/reload", 405, Some("Allow: POST")),
        ];
        for (method, path, want, header) in cases {
            let reply = get(&server, method, path);
            assert_eq!(reply.status, want, "{method} {path}");
            if let Some(header) = header {
                assert!(reply.headers.contains(header), "{}", reply.headers);
            }
        }
        assert_eq!(fake.reloads.load(Ordering::SeqCst), 0);
        for raw in [
            &b"garbage\r\n\r\n"[..],
            b"GET /metrics\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
            b"POST /reload HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        ] {
            assert_eq!(exchange(&server, &[raw]).status, 400, "{raw:?}");
        }
        let chunked = b"POST /reload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(exchange(&server, &[chunked]).status, 411);
    }

    #[test]
    fn partial_reads_bodies_and_bare_newlines() {
        let (fake, server) = start();
        let reply = exchange(
            &server,
            &[
                b"GE",
                b"T /met",
                b"rics HTTP/1.1\r\nHo",
                b"st: x\r",
                b"\n\r",
                b"\n",
            ],
        );
        assert_eq!((reply.status, reply.body.len()), (200, 21));
        let reply = exchange(
            &server,
            &[
                b"POST /reload HTTP/1.1\r\nContent-Length: 10\r\n\r\n01234",
                b"56789",
            ],
        );
        assert_eq!(reply.status, 200);
        assert_eq!(fake.reloads.load(Ordering::SeqCst), 1);
        assert_eq!(
            exchange(&server, &[b"GET /status HTTP/1.0\n\n"]).status,
            200
        );
    }

    #[test]
    fn oversized_requests_get_413() {
        let (fake, server) = start();
        // A head that never ends within the cap.
        let mut huge = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
        huge.resize(100 * 1024, b'a');
        let reply = exchange(&server, &[&huge]);
        assert_eq!(reply.status, 413);
        assert!(reply.body.contains("65536"));
        // A body announced over the cap is refused before it is read.
        let announced = b"POST /reload HTTP/1.1\r\nContent-Length: 70000\r\n\r\n";
        assert_eq!(exchange(&server, &[announced]).status, 413);
        assert_eq!(fake.reloads.load(Ordering::SeqCst), 0);
        // Just under the cap is fine.
        let head = "POST /reload HTTP/1.1\r\nContent-Length: 65000\r\n\r\n";
        let body = vec![b'x'; 65_000];
        assert_eq!(exchange(&server, &[head.as_bytes(), &body]).status, 200);
    }

    #[test]
    fn incomplete_request_times_out_with_408() {
        let (_fake, server) = start();
        let started = Instant::now();
        let reply = exchange(&server, &[b"GET /metrics HTTP/1.1\r\n"]);
        assert_eq!(reply.status, 408);
        assert!(started.elapsed() >= REQUEST_TIMEOUT);
    }

    #[test]
    fn panicking_handler_yields_500_and_server_keeps_serving() {
        let (fake, server) = start();
        fake.panic.store(true, Ordering::SeqCst);
        assert_eq!(get(&server, "GET", "/metrics").status, 500);
        assert_eq!(get(&server, "GET", "/health").status, 200);
    }

    #[test]
    fn bad_listen_address_is_named() {
        for listen in ["not an address", "127.0.0.1:99999", ""] {
            let err = serve(listen, Arc::new(Fake::default())).unwrap_err();
            assert!(err.to_string().contains(&format!("`{listen}`")), "{err}");
        }
        // A port already in use.
        let (_fake, server) = start();
        let taken = server.local_addr().to_string();
        let err = serve(&taken, Arc::new(Fake::default())).unwrap_err();
        assert!(matches!(err, HttpError::Bind { ref listen, .. } if *listen == taken));
    }

    #[test]
    fn shutdown_and_drop_stop_listening() {
        let (_fake, server) = start();
        let addr = server.local_addr();
        server.shutdown();
        assert!(TcpStream::connect(addr).is_err());
        let wildcard = serve("0.0.0.0:0", Arc::new(Fake::default())).unwrap();
        let port = wildcard.local_addr().port();
        drop(wildcard);
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}

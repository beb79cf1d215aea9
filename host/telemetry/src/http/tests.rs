//! The endpoint seen from raw sockets: status codes, headers, limits, starvation, access and
//! TLS.

use super::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;

#[derive(Default)]
struct Fake {
    unhealthy: AtomicBool,
    reject_reload: AtomicBool,
    reloads: AtomicU32,
    panic: AtomicBool,
    /// How long a reload takes.
    reload_ms: std::sync::atomic::AtomicU64,
    /// How long `/metrics` and `/status` take (a large estate's exposition).
    handler_ms: std::sync::atomic::AtomicU64,
    /// `/metrics` and `/status` calls begun, and ended.
    handling: AtomicU32,
    handled: AtomicU32,
}

impl Fake {
    fn work(&self) {
        self.handling.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(
            self.handler_ms.load(Ordering::SeqCst),
        ));
        self.handled.fetch_add(1, Ordering::SeqCst);
    }
}

impl Endpoints for Fake {
    fn metrics(&self) -> String {
        assert!(
            !self.panic.load(Ordering::SeqCst),
            "metrics handler panics on request"
        );
        self.work();
        "# TYPE up gauge\nup 1\n".into()
    }
    fn health(&self) -> (bool, String) {
        if self.unhealthy.load(Ordering::SeqCst) {
            (false, "flow a->b halted\n".into())
        } else {
            (true, "ok\n".into())
        }
    }
    fn reload(&self, detailed: bool) -> (bool, String) {
        self.reloads.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(self.reload_ms.load(Ordering::SeqCst)));
        if self.reject_reload.load(Ordering::SeqCst) {
            let why = if detailed {
                "config.toml: flows[0].source: unknown cluster"
            } else {
                "see the log"
            };
            (false, format!("rejected: {why}\n"))
        } else {
            (true, "reloaded\n".into())
        }
    }
    fn status(&self) -> String {
        self.work();
        r#"{"flows":[]}"#.into()
    }
}

fn start_with(options: Options) -> (Arc<Fake>, Server) {
    let fake = Arc::new(Fake::default());
    let server = serve("127.0.0.1:0", fake.clone(), options).unwrap();
    (fake, server)
}

fn start() -> (Arc<Fake>, Server) {
    start_with(Options::default())
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: String,
    body: String,
}

fn parse(raw: &str) -> Reply {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    Reply {
        status: head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0),
        headers: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
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
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse(&String::from_utf8_lossy(&raw))
}

fn request(server: &Server, method: &str, path: &str, headers: &[&str]) -> Reply {
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\n",
        server.local_addr()
    );
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    exchange(server, &[text.as_bytes()])
}

fn get(server: &Server, method: &str, path: &str) -> Reply {
    request(server, method, path, &[])
}

#[test]
fn endpoints_answer_with_status_type_and_body() {
    let (fake, server) = start();
    assert_ne!(server.local_addr().port(), 0);
    assert!(server.url().starts_with("http://127.0.0.1:"));
    let metrics = get(&server, "GET", "/metrics");
    assert_eq!(metrics.status, 200);
    assert!(metrics
        .headers
        .contains("content-type: text/plain; version=0.0.4"));
    assert!(metrics.headers.contains("connection: close"));
    assert!(metrics.headers.contains("content-length: 21"));
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
    assert!(status.headers.contains("content-type: application/json"));

    let reload = get(&server, "POST", "/reload");
    assert_eq!((reload.status, reload.body.as_str()), (200, "reloaded\n"));
    fake.reject_reload.store(true, Ordering::SeqCst);
    let reload = get(&server, "POST", "/reload");
    assert_eq!(reload.status, 409);
    // Without a token nobody is authenticated: no details.
    assert_eq!(reload.body, "rejected: see the log\n");
    assert_eq!(fake.reloads.load(Ordering::SeqCst), 2);
    server.shutdown();
}

#[test]
fn unknown_paths_wrong_methods_and_bad_requests() {
    let (fake, server) = start();
    let cases = [
        ("GET", "/nope", 404, None),
        ("GET", "/", 404, None),
        ("POST", "/metrics", 405, Some("allow: get")),
        ("DELETE", "/health", 405, Some("allow: get")),
        ("GET", "/reload", 405, Some("allow: post")),
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
        b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
        b"POST /reload HTTP/1.1\r\nContent-Length: x\r\n\r\n",
    ] {
        assert_eq!(exchange(&server, &[raw]).status, 400, "{raw:?}");
    }
    assert_eq!(fake.reloads.load(Ordering::SeqCst), 0);
}

#[test]
fn partial_reads_bodies_and_chunks() {
    let (fake, server) = start();
    let reply = exchange(
        &server,
        &[
            b"GE",
            b"T /met",
            b"rics HTTP/1.1\r\nHo",
            b"st: 127.0.0.1\r",
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
    let chunked =
        b"POST /reload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    assert_eq!(exchange(&server, &[chunked]).status, 200);
    assert_eq!(fake.reloads.load(Ordering::SeqCst), 2);
    assert_eq!(
        exchange(&server, &[b"GET /status HTTP/1.0\r\n\r\n"]).status,
        200
    );
}

#[test]
fn oversized_requests_are_refused() {
    let (fake, server) = start();
    // A head that never ends within the cap.
    let mut huge = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
    huge.resize(100 * 1024, b'a');
    assert_eq!(exchange(&server, &[&huge]).status, 431);
    // A body announced over the cap is refused before it is read.
    let announced = b"POST /reload HTTP/1.1\r\nContent-Length: 70000\r\n\r\n";
    let reply = exchange(&server, &[announced]);
    assert_eq!(reply.status, 413);
    assert!(reply.body.contains("65536"), "{}", reply.body);
    assert_eq!(fake.reloads.load(Ordering::SeqCst), 0);
    // Just under the cap is fine.
    let head = "POST /reload HTTP/1.1\r\nContent-Length: 65000\r\n\r\n";
    let body = vec![b'x'; 65_000];
    assert_eq!(exchange(&server, &[head.as_bytes(), &body]).status, 200);
}

#[test]
fn an_incomplete_request_is_closed_after_the_request_timeout() {
    let (_fake, server) = start();
    let started = Instant::now();
    let reply = exchange(&server, &[b"GET /metrics HTTP/1.1\r\n"]);
    assert_eq!(reply.status, 0, "closed without an answer: {reply:?}");
    let waited = started.elapsed();
    assert!(
        waited >= REQUEST_TIMEOUT && waited < REQUEST_TIMEOUT * 3,
        "{waited:?}"
    );
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
        let err = serve(listen, Arc::new(Fake::default()), Options::default()).unwrap_err();
        assert!(err.to_string().contains(&format!("`{listen}`")), "{err}");
    }
    // A port already in use.
    let (_fake, server) = start();
    let taken = server.local_addr().to_string();
    let err = serve(&taken, Arc::new(Fake::default()), Options::default()).unwrap_err();
    assert!(matches!(err, HttpError::Bind { ref listen, .. } if *listen == taken));
}

#[test]
fn shutdown_and_drop_stop_listening() {
    let (_fake, server) = start();
    let addr = server.local_addr();
    server.shutdown();
    assert!(TcpStream::connect(addr).is_err());
    let wildcard = serve("0.0.0.0:0", Arc::new(Fake::default()), Options::default()).unwrap();
    let port = wildcard.local_addr().port();
    drop(wildcard);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

/// Reads one response, its body by `Content-Length`, and leaves the connection as it is.
fn read_response(stream: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "the head ended early");
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    raw.extend_from_slice(&body);
    parse(&String::from_utf8_lossy(&raw))
}

/// Shutdown closes every open connection, one that was answered and that the client kept
/// open (it asked for keep-alive; the endpoint closes after every answer anyway) and one that
/// never sent a request, and no thread is left running when none is busy. Repeated: each of
/// the endpoint's threads used to be taken, now and then, for one still running while it
/// returned from its work, and "handler thread(s) still running at shutdown" was logged.
#[test]
fn shutdown_closes_open_connections_and_leaves_no_idle_thread_running() {
    for round in 0..20 {
        let (fake, server) = start();
        let addr = server.local_addr();
        let mut kept = TcpStream::connect(addr).unwrap();
        kept.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            kept,
            "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: keep-alive\r\n\r\n"
        )
        .unwrap();
        let reply = read_response(&mut kept);
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (200, "# TYPE up gauge\nup 1\n")
        );
        assert!(reply.headers.contains("connection: close"));
        let mut idle = TcpStream::connect(addr).unwrap();
        idle.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // Connections are accepted in order: once a later one is answered, the idle one is
        // open on the endpoint.
        assert_eq!(get(&server, "GET", "/health").status, 200);
        assert_eq!(server.shutdown(), 0, "round {round}: left running");
        assert_eq!(fake.handled.load(Ordering::SeqCst), 1);
        for (name, stream) in [("kept", &mut kept), ("idle", &mut idle)] {
            let mut rest = [0u8; 16];
            assert_eq!(stream.read(&mut rest).unwrap(), 0, "{name}: not closed");
        }
    }
}

/// A handler answering at shutdown has a second to finish (its client's connection is closed
/// unanswered): one that finishes in time is not counted, one that does not is left running,
/// counted and logged.
#[test]
fn shutdown_gives_a_busy_handler_a_second_and_counts_it_if_it_needs_more() {
    for (handler_ms, left) in [(300, 0), (3_000, 1)] {
        let (fake, server) = start();
        fake.handler_ms.store(handler_ms, Ordering::SeqCst);
        let addr = server.local_addr();
        let client =
            std::thread::spawn(move || get_within(addr, "/metrics", Duration::from_secs(10)));
        let until = Instant::now() + Duration::from_secs(10);
        while fake.handling.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < until, "the handler never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        // What counts is the count: the handler that needs 3 s outlasts the grace, the other
        // does not (no timing is asserted: a loaded machine may be slow to schedule either).
        assert_eq!(server.shutdown(), left, "a {handler_ms} ms handler");
        let finished = if left == 0 { 1 } else { 0 };
        assert_eq!(fake.handled.load(Ordering::SeqCst), finished);
        let answered = client.join().unwrap();
        assert!(
            answered.as_ref().is_none_or(|r| r.status == 0),
            "{answered:?}"
        );
    }
}

#[test]
fn reload_needs_the_token_and_a_page_of_another_origin_is_refused() {
    let (fake, server) = start_with(Options {
        reload: ReloadAccess::Token("t0ken".into()),
        ..Options::default()
    });
    let reply = get(&server, "POST", "/reload");
    assert_eq!(reply.status, 401);
    assert!(reply.headers.contains("www-authenticate: bearer"));
    assert_eq!(
        request(&server, "POST", "/reload", &["Authorization: Bearer nope"]).status,
        401
    );
    assert_eq!(fake.reloads.load(Ordering::SeqCst), 0);
    // The token holder gets the details of a rejection.
    fake.reject_reload.store(true, Ordering::SeqCst);
    let reply = request(&server, "POST", "/reload", &["Authorization: Bearer t0ken"]);
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (
            409,
            "rejected: config.toml: flows[0].source: unknown cluster\n"
        )
    );
    fake.reject_reload.store(false, Ordering::SeqCst);
    assert_eq!(
        request(&server, "POST", "/reload", &["Authorization: Bearer t0ken"]).status,
        200
    );
    // A browser page elsewhere, even with the token (a form cannot set it, but a script
    // holding it should not be trusted either).
    let reply = request(
        &server,
        "POST",
        "/reload",
        &["Authorization: Bearer t0ken", "Origin: http://evil.example"],
    );
    assert_eq!(reply.status, 403, "{}", reply.body);
    // DNS rebinding: the page's own name pointing at the endpoint.
    let rebound = exchange(
        &server,
        &[b"GET /status HTTP/1.1\r\nHost: evil.example:9464\r\n\r\n"],
    );
    assert_eq!(rebound.status, 403);
    assert!(rebound.body.contains("allowed_hosts"), "{}", rebound.body);
    assert_eq!(fake.reloads.load(Ordering::SeqCst), 2);

    let (fake, disabled) = start_with(Options {
        reload: ReloadAccess::Disabled,
        ..Options::default()
    });
    let reply = get(&disabled, "POST", "/reload");
    assert_eq!(reply.status, 404);
    assert!(reply.body.contains("reload = false"), "{}", reply.body);
    assert_eq!(fake.reloads.load(Ordering::SeqCst), 0);
    assert_eq!(get(&disabled, "GET", "/health").status, 200);

    // Closed (a non-loopback listen that named nobody): 403 saying which setting opens it;
    // the other endpoints answer as usual.
    let (fake, closed) = start_with(Options {
        reload: ReloadAccess::Closed,
        ..Options::default()
    });
    for headers in [&[][..], &["Authorization: Bearer 0123456789abcdef"][..]] {
        let reply = request(&closed, "POST", "/reload", headers);
        assert_eq!(reply.status, 403, "{}", reply.body);
        assert!(
            reply.body.contains("[metrics] reload_token") && reply.body.contains("reload = true"),
            "{}",
            reply.body
        );
    }
    assert_eq!(fake.reloads.load(Ordering::SeqCst), 0);
    assert_eq!(get(&closed, "GET", "/health").status, 200);
    assert_eq!(get(&closed, "GET", "/status").status, 200);
}

#[test]
fn probes_answer_while_a_slow_reload_runs_and_reloads_do_not_overlap() {
    let (fake, server) = start();
    fake.reload_ms.store(3_000, Ordering::SeqCst);
    let addr = server.local_addr();
    let reloading = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "POST /reload HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        parse(&raw).status
    });
    let until = Instant::now() + Duration::from_secs(10);
    while fake.reloads.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < until, "the reload never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(get(&server, "POST", "/reload").status, 409, "one at a time");
    let mut probes = 0;
    while !reloading.is_finished() {
        let started = Instant::now();
        assert_eq!(get(&server, "GET", "/health").status, 200);
        assert!(started.elapsed() < Duration::from_millis(500));
        probes += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(reloading.join().unwrap(), 200);
    assert!(probes >= 10, "{probes} probes during a 3 s reload");
    assert_eq!(fake.reloads.load(Ordering::SeqCst), 1);
}

/// `GET path` on a connection of its own; `None` when nothing complete came back within
/// `patience` (the client gave up) or the connection failed.
fn get_within(addr: std::net::SocketAddr, path: &str, patience: Duration) -> Option<Reply> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(patience)).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    Some(parse(&String::from_utf8_lossy(&raw)))
}

/// What the flooding clients got.
#[derive(Default)]
struct Tally {
    ok: AtomicU32,
    shed: AtomicU32,
    shed_without_retry_after: AtomicU32,
    gave_up: AtomicU32,
    other: AtomicU32,
}

impl Tally {
    fn count(&self, reply: Option<Reply>) {
        let counter = match reply {
            None => &self.gave_up,
            Some(r) if r.status == 200 => &self.ok,
            Some(r) if r.status == 503 && r.headers.contains("retry-after: ") => &self.shed,
            Some(r) if r.status == 503 => &self.shed_without_retry_after,
            Some(_) => &self.other,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }

    fn answered(&self) -> u32 {
        [
            &self.ok,
            &self.shed,
            &self.shed_without_retry_after,
            &self.gave_up,
            &self.other,
        ]
        .iter()
        .map(|c| c.load(Ordering::SeqCst))
        .sum()
    }
}

/// 64 clients loop on complete `GET /metrics` and `GET /status` requests whose handlers take
/// 80 ms (the handler threads are saturated many times over; a client gives up after a second
/// and asks again, as an impatient scraper does) while a probe loops on `/health` for 3 s:
/// every probe is answered 200 within a second, and every flood request is either served or
/// refused at once with 503 and `Retry-After`.
#[test]
fn a_flood_of_complete_requests_cannot_starve_probes() {
    let (fake, server) = start();
    fake.handler_ms.store(80, Ordering::SeqCst);
    let addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let flood: Vec<_> = (0..64)
        .map(|i| {
            let (stop, tally) = (Arc::clone(&stop), Arc::clone(&tally));
            let path = if i % 2 == 0 { "/metrics" } else { "/status" };
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    tally.count(get_within(addr, path, Duration::from_secs(1)));
                }
            })
        })
        .collect();
    // Probe once every client has had an answer (or given up): the handlers are saturated.
    let until = Instant::now() + Duration::from_secs(20);
    while tally.answered() < 64 {
        assert!(Instant::now() < until, "the flood never got going");
        std::thread::sleep(Duration::from_millis(10));
    }
    let flood_started = Instant::now();
    let (mut probes, mut failed, mut slowest) = (0u32, Vec::new(), Duration::ZERO);
    while flood_started.elapsed() < Duration::from_secs(3) {
        let started = Instant::now();
        let reply = get_within(addr, "/health", Duration::from_secs(10));
        let took = started.elapsed();
        slowest = slowest.max(took);
        probes += 1;
        match reply {
            Some(r) if r.status == 200 && took < Duration::from_secs(1) => {}
            other => failed.push((other.map(|r| r.status), took)),
        }
    }
    let flood_answers_before_stop = tally.answered();
    stop.store(true, Ordering::SeqCst);
    for client in flood {
        client.join().unwrap();
    }
    let n = |c: &AtomicU32| c.load(Ordering::SeqCst);
    eprintln!(
        "flood of 64 clients for {:?}: {} answered while probing; ok {}, 503 {} \
         (without Retry-After {}), gave up after 1 s {}, other {}; {probes} probes, \
         {} failed or over 1 s, slowest {slowest:?}",
        flood_started.elapsed(),
        flood_answers_before_stop,
        n(&tally.ok),
        n(&tally.shed),
        n(&tally.shed_without_retry_after),
        n(&tally.gave_up),
        n(&tally.other),
        failed.len(),
    );
    assert!(
        failed.is_empty(),
        "{} of {probes} probes failed or took over 1 s (slowest {slowest:?}): {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    assert!(probes >= 10, "only {probes} probes in 3 s");
    assert!(n(&tally.ok) > 0, "no flood request was served");
    assert!(n(&tally.shed) > 0, "the handlers were never full");
    assert_eq!(n(&tally.shed_without_retry_after), 0);
    assert_eq!(n(&tally.gave_up), 0, "a flood request waited over 1 s");
    assert_eq!(n(&tally.other), 0);
}

/// This process's open file descriptors and resident memory (KiB).
fn fds_and_rss() -> (usize, u64) {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0);
    (fds, rss)
}

/// 500 idle clients and 50 that send their head a byte at a time, each reconnecting as soon as
/// the endpoint closes it: `/health` and `/metrics` answer within a second throughout.
#[test]
fn idle_and_slow_clients_cannot_starve_probes() {
    use std::io::ErrorKind;
    let (_fake, server) = start();
    let addr = server.local_addr();
    let (fds_before, rss_before) = fds_and_rss();
    let stop = Arc::new(AtomicBool::new(false));
    let reconnects = Arc::new(AtomicU32::new(0));
    let attack = {
        let stop = Arc::clone(&stop);
        let reconnects = Arc::clone(&reconnects);
        std::thread::spawn(move || {
            let open = |slow: bool| {
                let mut s = TcpStream::connect(addr).ok()?;
                s.set_nonblocking(true).ok()?;
                if slow {
                    let _ = s.write(b"GET /health HTTP/1.1\r\n");
                }
                Some((s, slow))
            };
            let mut clients: Vec<Option<(TcpStream, bool)>> =
                (0..550).map(|i| open(i >= 500)).collect();
            let mut buf = [0u8; 1024];
            while !stop.load(Ordering::SeqCst) {
                for slot in clients.iter_mut() {
                    let closed = match slot {
                        None => true,
                        Some((s, slow)) => {
                            let gone = matches!(s.read(&mut buf), Ok(0))
                                || matches!(s.read(&mut buf), Err(ref e) if e.kind() != ErrorKind::WouldBlock);
                            if !gone && *slow {
                                let _ = s.write(b"X");
                            }
                            gone
                        }
                    };
                    if closed {
                        let slow = slot.as_ref().is_some_and(|(_, slow)| *slow);
                        *slot = open(slow);
                        reconnects.fetch_add(1, Ordering::SeqCst);
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            clients.len()
        })
    };
    // Wait until the endpoint has had to evict or time out attackers, so the probes below run
    // while it is full.
    let until = Instant::now() + Duration::from_secs(20);
    while reconnects.load(Ordering::SeqCst) < 100 {
        assert!(
            Instant::now() < until,
            "the attack never filled the endpoint"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (fds_during, rss_during) = fds_and_rss();
    let mut slowest = Duration::ZERO;
    for i in 0..30 {
        let started = Instant::now();
        let path = if i % 3 == 0 { "/metrics" } else { "/health" };
        let reply = get(&server, "GET", path);
        let took = started.elapsed();
        slowest = slowest.max(took);
        assert_eq!(reply.status, 200, "{path} after {took:?}");
        assert!(took < Duration::from_secs(1), "{path} took {took:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::SeqCst);
    assert_eq!(attack.join().unwrap(), 550);
    let evicted = reconnects.load(Ordering::SeqCst);
    // The attackers' sockets are closed; the endpoint's follow within the request timeout.
    let until = Instant::now() + REQUEST_TIMEOUT * 3;
    let mut fds_after = fds_and_rss().0;
    while fds_after > fds_before + 50 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
        fds_after = fds_and_rss().0;
    }
    eprintln!(
        "550 attacking clients ({evicted} reconnects): slowest probe {slowest:?}; \
         fds {fds_before} -> {fds_during} -> {fds_after}; RSS {rss_before} -> {rss_during} KiB"
    );
    // Both ends of every connection are in this process: at most 550 client sockets and
    // MAX_CONNECTIONS endpoint sockets (the margin is for the other tests of this binary,
    // which run at the same time in the same process).
    assert!(
        fds_during <= fds_before + 550 + MAX_CONNECTIONS + 100,
        "{fds_during}"
    );
    assert!(fds_after <= fds_before + 50, "{fds_before} -> {fds_after}");
    assert!(
        rss_during < rss_before + 256 * 1024,
        "{rss_before} -> {rss_during} KiB"
    );
}

mod tls {
    use super::*;
    use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
    use refract_testkit::tls::Ca;

    fn https_get(server: &Server, ca: &std::path::Path, path: &str) -> (u16, String) {
        let mut connector = SslConnector::builder(SslMethod::tls_client()).unwrap();
        connector.set_ca_file(ca).unwrap();
        connector.set_verify(SslVerifyMode::PEER);
        let connector = connector.build();
        let tcp = TcpStream::connect(server.local_addr()).unwrap();
        let mut s = connector.connect("localhost", tcp).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let reply = parse(&String::from_utf8_lossy(&raw));
        let serial = s
            .ssl()
            .peer_certificate()
            .map(|c| c.serial_number().to_bn().unwrap().to_string())
            .unwrap_or_default();
        assert!(reply.status != 0, "{raw:?}");
        (reply.status, serial)
    }

    #[test]
    fn https_with_a_test_ca_and_a_renewed_certificate_taken_without_restart() {
        let ca = Ca::new("endpoint test CA");
        let first = ca.issue("endpoint", "localhost", &["localhost", "127.0.0.1"], false);
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        std::fs::copy(&first.cert, &cert).unwrap();
        std::fs::copy(&first.key, &key).unwrap();
        let (_fake, server) = start_with(Options {
            tls: Some(TlsFiles::new(&cert, &key)),
            ..Options::default()
        });
        assert!(server.url().starts_with("https://"));
        let (status, serial) = https_get(&server, &ca.ca_pem(), "/health");
        assert_eq!(status, 200);
        // Plain HTTP on the HTTPS port gets no answer.
        assert_eq!(get(&server, "GET", "/health").status, 0);
        // Renewal: new files in place; the next connections after the check interval use them.
        let renewed = ca.issue("renewed", "localhost", &["localhost"], false);
        std::fs::copy(&renewed.cert, &cert).unwrap();
        std::fs::copy(&renewed.key, &key).unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let (status, now) = https_get(&server, &ca.ca_pem(), "/health");
            assert_eq!(status, 200);
            if now != serial {
                break;
            }
            assert!(
                Instant::now() < until,
                "the renewed certificate was never used"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        // A broken renewal keeps the working certificate.
        std::fs::write(&key, "not a key").unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(https_get(&server, &ca.ca_pem(), "/health").0, 200);
    }

    #[test]
    fn bad_tls_files_are_named_and_the_key_is_never_shown() {
        let ca = Ca::new("endpoint test CA");
        let a = ca.issue("a", "localhost", &["localhost"], false);
        let b = ca.issue("b", "localhost", &["localhost"], false);
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "secret-looking-text").unwrap();
        let fail = |cert: &std::path::Path, key: &std::path::Path| {
            serve(
                "127.0.0.1:0",
                Arc::new(Fake::default()),
                Options {
                    tls: Some(TlsFiles::new(cert, key)),
                    ..Options::default()
                },
            )
            .unwrap_err()
            .to_string()
        };
        let e = fail(&a.cert, &b.key);
        assert!(e.contains("does not belong to certificate"), "{e}");
        let e = fail(&a.cert, &garbage);
        assert!(
            e.contains("garbage.pem") && !e.contains("secret-looking"),
            "{e}"
        );
        let e = fail(&garbage, &a.key);
        assert!(e.contains("holds no PEM certificate"), "{e}");
        let e = fail(dir.path(), &a.key);
        assert!(e.contains("not a regular file"), "{e}");
        let e = fail(&dir.path().join("missing.pem"), &a.key);
        assert!(e.contains("missing.pem"), "{e}");
    }
}

//! refract's metrics endpoint seen from a test: a plain HTTP request and one series' value.

use std::io::{Read, Write};

/// A plain HTTP/1.1 request to the metrics endpoint at `addr`: (status code, body).
pub fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    http_with(addr, method, path, &[])
}

/// [`http`] with extra header lines (`"Authorization: Bearer …"`).
pub fn http_with(addr: &str, method: &str, path: &str, headers: &[&str]) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    exchange(&mut s, addr, (method, path), headers)
}

/// Writes one request (`Connection: close`) to `stream` and reads the reply: (status code,
/// body). Shared by [`http_with`] and the test kit's HTTPS client.
pub(crate) fn exchange(
    stream: &mut (impl Read + Write),
    addr: &str,
    (method, path): (&str, &str),
    headers: &[&str],
) -> (u16, String) {
    let mut extra = String::new();
    for h in headers {
        extra.push_str(h);
        extra.push_str("\r\n");
    }
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n{extra}\r\n"
    )
    .expect("write");
    let mut raw = Vec::new();
    // A TLS peer may close without close_notify after the whole answer.
    let _ = stream.read_to_end(&mut raw);
    let out = String::from_utf8_lossy(&raw);
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The value of the series `name` in the Prometheus text `text` whose labels include all of
/// `labels`.
pub fn series(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::series;

    #[test]
    fn series_finds_the_labelled_value() {
        let text = "# HELP x\nrefract_lag{flow=\"a\",partition=\"0\"} 7\nrefract_lag{flow=\"b\",partition=\"0\"} 9\nrefract_up 1\n";
        assert_eq!(series(text, "refract_lag", &[("flow", "b")]), Some(9.0));
        assert_eq!(series(text, "refract_up", &[]), Some(1.0));
        assert_eq!(series(text, "refract_lag", &[("flow", "c")]), None);
    }
}

//! A schema-registry stand-in for unit tests: a loopback HTTP/1.1 server that answers each
//! request with what a closure returns, closing the connection after each answer.

use std::io::{BufRead, BufReader, Read, Write};

/// One request as the stand-in read it.
pub(crate) struct Request {
    pub(crate) method: String,
    /// The path, percent-encoding kept, without the query.
    pub(crate) path: String,
    /// Header lines as `name: value`, names lower-cased.
    pub(crate) headers: Vec<String>,
}

impl Request {
    /// The value of header `name` (lower case), if sent.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|h| {
            h.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(':'))
                .map(str::trim)
        })
    }
}

/// Serves `answer` on a free loopback port until the test process ends; the base URL.
pub(crate) fn serve(answer: impl Fn(&Request) -> (u16, String) + Send + 'static) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                continue;
            }
            let mut words = line.split_whitespace();
            let method = words.next().unwrap_or_default().to_string();
            let target = words.next().unwrap_or_default();
            let path = target.split('?').next().unwrap_or_default().to_string();
            let mut headers = Vec::new();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
                let header = header.trim_end();
                let (name, value) = header.split_once(':').unwrap_or((header, ""));
                headers.push(format!("{}:{value}", name.to_lowercase()));
            }
            let request = Request {
                method,
                path,
                headers,
            };
            let length: usize = request
                .header("content-length")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let (status, body) = answer(&request);
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

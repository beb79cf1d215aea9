//! HTTPS for the endpoint: the certificate chain and key from PEM files, re-read when either
//! file changes (a renewed certificate takes effect without a restart; a broken renewal is
//! logged and the working one kept).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use openssl::pkey::PKey;
use openssl::ssl::{Ssl, SslAcceptor, SslMethod};
use openssl::x509::X509;
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

use super::connections::Connection;

/// Largest certificate or key file read.
const MAX_PEM_BYTES: u64 = 1024 * 1024;
/// How often the files are checked for a change (at most once per this, on a connection).
const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The PEM files the endpoint serves HTTPS with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key (unencrypted).
    pub key: PathBuf,
}

/// What identifies a version of the files: modification time and length of each.
type Stamp = Option<[(SystemTime, u64); 2]>;

fn stamp(files: &TlsFiles) -> Stamp {
    let one = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    };
    Some([one(&files.cert)?, one(&files.key)?])
}

/// The acceptor in use and the files it came from.
pub(super) struct Tls {
    files: TlsFiles,
    current: Mutex<(Arc<SslAcceptor>, Stamp, Instant)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads a regular file of at most [`MAX_PEM_BYTES`]; the error names the file, never its
/// content.
fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{what} {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{what} {shown} is not a regular file"));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{what} {shown}: {e}"))?;
    let mut out = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{what} {shown}: {e}"))?;
    if out.len() as u64 > MAX_PEM_BYTES {
        return Err(format!(
            "{what} {shown} is larger than {MAX_PEM_BYTES} bytes"
        ));
    }
    Ok(out)
}

fn build(files: &TlsFiles) -> Result<SslAcceptor, String> {
    let cert = read_pem(&files.cert, "certificate")?;
    let key = read_pem(&files.key, "key")?;
    let chain = X509::stack_from_pem(&cert)
        .ok()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            format!(
                "certificate {} holds no PEM certificate",
                files.cert.display()
            )
        })?;
    // The key's parse error is not shown: it may quote the file.
    let key = PKey::private_key_from_pem(&key).map_err(|_| {
        format!(
            "key {} holds no unencrypted PEM private key",
            files.key.display()
        )
    })?;
    let openssl_error = |e: openssl::error::ErrorStack| format!("TLS setup: {e}");
    let mut builder =
        SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).map_err(openssl_error)?;
    let mut certs = chain.into_iter();
    if let Some(leaf) = certs.next() {
        builder.set_certificate(&leaf).map_err(openssl_error)?;
    }
    for extra in certs {
        builder.add_extra_chain_cert(extra).map_err(openssl_error)?;
    }
    let mismatch = |_| {
        format!(
            "key {} does not belong to certificate {}",
            files.key.display(),
            files.cert.display()
        )
    };
    builder.set_private_key(&key).map_err(mismatch)?;
    builder.check_private_key().map_err(mismatch)?;
    Ok(builder.build())
}

impl Tls {
    /// Loads the files; an error names the file that is wrong.
    pub(super) fn load(files: TlsFiles) -> Result<Self, String> {
        let stamp = stamp(&files);
        let acceptor = build(&files)?;
        Ok(Self {
            files,
            current: Mutex::new((Arc::new(acceptor), stamp, Instant::now())),
        })
    }

    /// The acceptor for a new connection, rebuilt first when the files changed.
    pub(super) fn acceptor(&self) -> Arc<SslAcceptor> {
        let mut current = lock(&self.current);
        if current.2.elapsed() >= CHECK_INTERVAL {
            current.2 = Instant::now();
            let now = stamp(&self.files);
            if now != current.1 {
                current.1 = now;
                match build(&self.files) {
                    Ok(acceptor) => {
                        current.0 = Arc::new(acceptor);
                        tracing::info!(
                            "HTTP endpoint: certificate {} reloaded",
                            self.files.cert.display()
                        );
                    }
                    Err(e) => tracing::warn!(
                        "HTTP endpoint: keeping the certificate in use, the changed files cannot be used: {e}"
                    ),
                }
            }
        }
        Arc::clone(&current.0)
    }
}

/// The TLS handshake, within the connection's request deadline; `None` when it fails, times
/// out or the connection is evicted.
pub(super) async fn handshake(
    acceptor: &SslAcceptor,
    stream: TcpStream,
    connection: &Connection,
) -> Option<SslStream<TcpStream>> {
    let ssl = Ssl::new(acceptor.context()).ok()?;
    let mut stream = SslStream::new(ssl, stream).ok()?;
    let done = tokio::select! {
        accepted = Pin::new(&mut stream).accept() => accepted.is_ok(),
        () = connection.expired() => false,
    };
    done.then_some(stream)
}

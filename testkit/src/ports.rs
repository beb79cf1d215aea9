//! Free loopback ports and KRaft cluster ids.

use std::io::Read;
use std::net::TcpListener;
use std::sync::Mutex;

/// A loopback port nobody in this process has been given before and that was free a moment ago.
/// Another process can still take it before the broker binds it: [`crate::Broker`] retries with
/// new ports when its broker reports the address in use.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().expect("local addr").port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A random KRaft cluster id, as `kafka-storage random-uuid` makes: 16 random bytes (from
/// `/dev/urandom`), base64url without padding (22 characters). Its first character is never
/// '-' or '_' (top bit cleared), so it never reads as an option, as Kafka's own
/// `Uuid.randomUuid` avoids too.
pub fn cluster_id() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("reading /dev/urandom for a cluster id");
    encode_cluster_id(bytes)
}

fn encode_cluster_id(mut bytes: [u8; 16]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    bytes[0] &= 0x7f;
    let bits = u128::from_be_bytes(bytes);
    // 22 characters of 6 bits = 132 bits: the 128 bits, then 4 zero bits
    (0..22)
        .map(|i| {
            let shift = 128i32 - 6 * (i + 1);
            let v = if shift >= 0 {
                (bits >> shift) & 63
            } else {
                (bits << -shift) & 63
            };
            ALPHABET[v as usize] as char
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_not_given_twice() {
        let ports: Vec<u16> = (0..20).map(|_| free_port()).collect();
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ports.len());
    }

    #[test]
    fn cluster_ids_are_base64url_of_16_bytes() {
        // All ones: the top bit is cleared, the last character carries 2 bits and 4 zero bits.
        assert_eq!(
            encode_cluster_id([0xff; 16]),
            format!("f{}w", "_".repeat(20))
        );
        assert_eq!(encode_cluster_id([0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        let id = cluster_id();
        assert_eq!(id.len(), 22);
        assert!(!id.starts_with(['-', '_']));
        assert_ne!(id, cluster_id());
    }
}

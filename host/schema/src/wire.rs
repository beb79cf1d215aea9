//! The Confluent wire format: byte 0 (the magic byte, `0`), the schema id as a 4-byte
//! big-endian integer, then the serialized payload (for Protobuf, the message indexes first).
//! Translation rewrites the 4 id bytes and leaves every other byte as it was, message indexes
//! included.

/// The magic byte of a framed record.
pub const MAGIC: u8 = 0;
/// Magic byte plus schema id.
pub const HEADER_LEN: usize = 5;

/// The schema id of a framed key or value; `None` for bytes that are not framed (null, shorter
/// than the header, or another first byte), which pass unchanged.
pub fn framed_id(bytes: &[u8]) -> Option<u32> {
    match bytes {
        [MAGIC, a, b, c, d, ..] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// `bytes` with its schema id replaced by `id`, into `out` (cleared first).
pub fn reframe_into(bytes: &[u8], id: u32, out: &mut Vec<u8>) {
    out.clear();
    out.reserve(bytes.len());
    out.push(MAGIC);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(bytes.get(HEADER_LEN..).unwrap_or_default());
}

/// `bytes` with its schema id replaced by `id`.
pub fn reframe(bytes: &[u8], id: u32) -> Vec<u8> {
    let mut out = Vec::new();
    reframe_into(bytes, id, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_framed_bytes_have_an_id() {
        assert_eq!(framed_id(&[0, 0, 0, 1, 44, 9, 9]), Some(300));
        assert_eq!(framed_id(&[0, 0, 0, 0, 7]), Some(7));
        assert_eq!(framed_id(&[0, 0, 0, 7]), None, "4 bytes: too short");
        assert_eq!(framed_id(&[1, 0, 0, 0, 7]), None);
        assert_eq!(framed_id(b"{\"json\":1}"), None);
        assert_eq!(framed_id(&[]), None);
    }

    #[test]
    fn reframing_changes_the_id_bytes_only() {
        // A Protobuf record: message indexes [1] (zig-zag varints 2, 2) then the payload.
        let framed = [0, 0, 0, 0, 7, 2, 2, 0x0a, 3, b'a', b'b', b'c'];
        let out = reframe(&framed, 0x0102_0304);
        assert_eq!(out, [0, 1, 2, 3, 4, 2, 2, 0x0a, 3, b'a', b'b', b'c']);
        assert_eq!(reframe(&[0, 0, 0, 0, 7], 9), [0, 0, 0, 0, 9]);
    }
}

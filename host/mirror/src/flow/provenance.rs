//! The provenance header: which clusters a record has passed through, so active/active
//! pairs do not mirror records back where they came from.

use std::borrow::Cow;

use refract_kafka::headers::RawHeaders;

/// Header naming the clusters a record has been mirrored from, oldest first, comma-separated.
pub const PROVENANCE_HEADER: &str = "refract.provenance";

/// The provenance header value for a record mirrored from `source` to `target`: the clusters it
/// already passed through plus `source`. `None` when it passed through `target` already (sending
/// it there again would be a loop).
pub fn provenance<'s>(
    headers: Option<RawHeaders<'_>>,
    source: &'s str,
    target: &str,
) -> Option<Cow<'s, str>> {
    let previous = headers.and_then(|h| h.last(PROVENANCE_HEADER).flatten());
    match previous {
        // The common case, a record produced on the source: no allocation.
        None | Some(b"") => Some(Cow::Borrowed(source)),
        Some(v) => stamp_after(Some(&String::from_utf8_lossy(v)), source, target).map(Cow::Owned),
    }
}

/// [`provenance`] on the header's text.
pub fn stamp_after(previous: Option<&str>, source: &str, target: &str) -> Option<String> {
    match previous.filter(|p| !p.is_empty()) {
        None => Some(source.to_string()),
        Some(p) => {
            if p.split(',').any(|c| c == target) {
                None
            } else if p.split(',').next_back() == Some(source) {
                Some(p.to_string())
            } else {
                Some(format!("{p},{source}"))
            }
        }
    }
}

#[cfg(test)]
mod provenance_tests {
    use super::stamp_after;

    #[test]
    fn stamps_and_detects_loops() {
        assert_eq!(stamp_after(None, "a", "b").as_deref(), Some("a"));
        assert_eq!(stamp_after(Some(""), "a", "b").as_deref(), Some("a"));
        assert_eq!(stamp_after(Some("a"), "b", "c").as_deref(), Some("a,b"));
        // a -> b -> a: back to where it came from
        assert_eq!(stamp_after(Some("a"), "b", "a"), None);
        assert_eq!(stamp_after(Some("a,b"), "c", "a"), None);
        assert_eq!(stamp_after(Some("a,b"), "c", "b"), None);
        // a cluster alias is matched whole, not as a prefix
        assert_eq!(stamp_after(Some("ab"), "c", "a").as_deref(), Some("ab,c"));
    }
}

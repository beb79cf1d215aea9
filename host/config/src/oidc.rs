//! OAUTHBEARER with OIDC client credentials (`sasl.oauthbearer.method = "oidc"`): librdkafka's
//! names for the settings, read into one value refract's own token client uses. librdkafka
//! fetches OIDC tokens with libcurl, which refract's vendored build does not link, so these
//! settings never reach librdkafka: refract fetches the token, hands it to every client and
//! refreshes it before it expires.

use std::collections::BTreeMap;
use std::fmt;

/// The grant refract implements (OAuth 2.0 client credentials, RFC 6749 §4.4).
pub const CLIENT_CREDENTIALS: &str = "client_credentials";

/// How a cluster's clients get an OIDC token.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Oidc {
    /// `sasl.oauthbearer.token.endpoint.url`: where the token is fetched (HTTP POST).
    pub token_endpoint: String,
    /// `sasl.oauthbearer.client.id`.
    pub client_id: String,
    /// `sasl.oauthbearer.client.secret`: never shown.
    pub client_secret: String,
    /// `sasl.oauthbearer.scope`, sent as the request's `scope`.
    pub scope: Option<String>,
    /// `sasl.oauthbearer.extensions` (`key=value,key=value`): SASL extensions sent with the token.
    pub extensions: Vec<(String, String)>,
    /// `https.ca.location`: a PEM file of the CAs the token endpoint's certificate is checked
    /// against, instead of the system's.
    pub ca_location: Option<String>,
    /// `https.ca.pem`: the same as PEM text.
    pub ca_pem: Option<String>,
    /// `sasl.oauthbearer.sub.claim.name`: the JWT claim that names the principal (`sub`).
    pub sub_claim: String,
}

impl fmt::Debug for Oidc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Oidc")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &crate::REDACTED)
            .field("scope", &self.scope)
            .field("extensions", &self.extensions)
            .field("ca_location", &self.ca_location)
            .finish_non_exhaustive()
    }
}

/// Whether a cluster's client settings ask for OIDC.
pub fn is_oidc(settings: &BTreeMap<String, String>) -> bool {
    settings
        .get("sasl.oauthbearer.method")
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("oidc"))
}

/// Whether librdkafka must not see `key` when refract fetches the OIDC token itself: it would
/// refuse them (no libcurl) or fetch a token of its own.
pub fn is_oidc_key(key: &str) -> bool {
    (key.starts_with("sasl.oauthbearer.") && key != "sasl.oauthbearer.config")
        || key.starts_with("https.ca.")
}

/// The OIDC settings among a client's librdkafka settings, `Ok(None)` when they do not ask for
/// OIDC. The error names the setting that is missing or wrong (never a secret's value).
pub fn from_settings(settings: &BTreeMap<String, String>) -> Result<Option<Oidc>, String> {
    if !is_oidc(settings) {
        return Ok(None);
    }
    let get = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| settings.get(*k))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let mechanism = get(&["sasl.mechanism", "sasl.mechanisms"]);
    if !mechanism
        .as_deref()
        .is_some_and(|m| m.eq_ignore_ascii_case("OAUTHBEARER"))
    {
        return Err(
            "sasl.oauthbearer.method = \"oidc\" needs \"sasl.mechanism\" = \"OAUTHBEARER\"".into(),
        );
    }
    if let Some(grant) = get(&["sasl.oauthbearer.grant.type"]) {
        if grant != CLIENT_CREDENTIALS {
            return Err(format!(
                "\"sasl.oauthbearer.grant.type\" = \"{grant}\": refract fetches OIDC tokens with the \
                 client-credentials grant only (\"{CLIENT_CREDENTIALS}\"); for another grant, fetch the \
                 token outside and give it as [clusters.<alias>.oauthbearer] token = \"${{file:…}}\""
            ));
        }
    }
    if let Some(kind) = get(&["sasl.oauthbearer.metadata.authentication.type"]) {
        if !kind.eq_ignore_ascii_case("none") {
            return Err(format!(
                "\"sasl.oauthbearer.metadata.authentication.type\" = \"{kind}\" is not supported: \
                 refract fetches OIDC tokens with client credentials only"
            ));
        }
    }
    let Some(token_endpoint) = get(&["sasl.oauthbearer.token.endpoint.url"]) else {
        return Err(
            "sasl.oauthbearer.method = \"oidc\" needs \"sasl.oauthbearer.token.endpoint.url\""
                .into(),
        );
    };
    let scheme_ok = ["https://", "http://"].iter().any(|s| {
        token_endpoint.len() > s.len() && token_endpoint[..s.len()].eq_ignore_ascii_case(s)
    });
    if !scheme_ok {
        return Err(format!(
            "\"sasl.oauthbearer.token.endpoint.url\" = \"{token_endpoint}\" is not an http(s) URL"
        ));
    }
    let Some(client_id) = get(&[
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.credentials.client.id",
    ]) else {
        return Err(
            "sasl.oauthbearer.method = \"oidc\" needs \"sasl.oauthbearer.client.id\"".into(),
        );
    };
    let Some(client_secret) = get(&[
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.client.credentials.client.secret",
    ]) else {
        return Err(
            "sasl.oauthbearer.method = \"oidc\" needs \"sasl.oauthbearer.client.secret\"".into(),
        );
    };
    let mut extensions = Vec::new();
    if let Some(text) = get(&["sasl.oauthbearer.extensions"]) {
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(format!(
                    "\"sasl.oauthbearer.extensions\": `{pair}` is not key=value"
                ));
            };
            extensions.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok(Some(Oidc {
        token_endpoint,
        client_id,
        client_secret,
        scope: get(&["sasl.oauthbearer.scope"]),
        extensions,
        ca_location: get(&["https.ca.location"]),
        ca_pem: get(&["https.ca.pem"]),
        sub_claim: get(&["sasl.oauthbearer.sub.claim.name"]).unwrap_or_else(|| "sub".into()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const BASE: &[(&str, &str)] = &[
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.oauthbearer.method", "OIDC"),
        ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
        ("sasl.oauthbearer.client.id", "refract"),
        ("sasl.oauthbearer.client.secret", "s3cret"),
    ];

    #[test]
    fn reads_librdkafka_names_and_hides_the_secret() {
        let mut s = settings(BASE);
        s.insert("sasl.oauthbearer.scope".into(), "kafka".into());
        s.insert("sasl.oauthbearer.extensions".into(), "a=1, b=2".into());
        let oidc = from_settings(&s).expect("valid").expect("oidc");
        assert_eq!(oidc.token_endpoint, "https://idp/token");
        assert_eq!(oidc.client_id, "refract");
        assert_eq!(oidc.client_secret, "s3cret");
        assert_eq!(oidc.scope.as_deref(), Some("kafka"));
        assert_eq!(
            oidc.extensions,
            vec![("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        assert_eq!(oidc.sub_claim, "sub");
        assert!(!format!("{oidc:?}").contains("s3cret"));
    }

    #[test]
    fn not_oidc_is_none() {
        assert_eq!(
            from_settings(&settings(&[("sasl.mechanism", "PLAIN")])),
            Ok(None)
        );
    }

    #[test]
    fn each_missing_or_wrong_setting_is_named() {
        for (drop, change, expect) in [
            (
                "sasl.oauthbearer.token.endpoint.url",
                None,
                "token.endpoint.url",
            ),
            ("sasl.oauthbearer.client.id", None, "client.id"),
            ("sasl.oauthbearer.client.secret", None, "client.secret"),
            ("sasl.mechanism", None, "sasl.mechanism"),
            (
                "",
                Some(("sasl.oauthbearer.token.endpoint.url", "file:///t")),
                "not an http(s) URL",
            ),
            (
                "",
                Some((
                    "sasl.oauthbearer.grant.type",
                    "urn:ietf:params:oauth:grant-type:jwt-bearer",
                )),
                "client-credentials grant only",
            ),
            (
                "",
                Some(("sasl.oauthbearer.extensions", "novalue")),
                "not key=value",
            ),
        ] {
            let mut s = settings(BASE);
            s.remove(drop);
            if let Some((k, v)) = change {
                s.insert(k.into(), v.into());
            }
            let err = from_settings(&s).expect_err(expect);
            assert!(err.contains(expect), "{err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
    }

    #[test]
    fn librdkafka_never_sees_the_oidc_keys() {
        assert!(is_oidc_key("sasl.oauthbearer.client.secret"));
        assert!(is_oidc_key("sasl.oauthbearer.method"));
        assert!(is_oidc_key("https.ca.location"));
        assert!(!is_oidc_key("sasl.oauthbearer.config"));
        assert!(!is_oidc_key("sasl.mechanism"));
    }
}

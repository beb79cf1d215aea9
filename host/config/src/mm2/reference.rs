//! The MirrorMaker 2 key mapping (`docs/src/reference/mm2-keys.md`), rendered from the tables
//! the converter reads: what each MM2 property becomes in the pipeline, and which ones are
//! accepted, ignored or reported, and why.

use super::convert::ROLES;
use super::security::{
    KERBEROS, KERBEROS_OPTIONS, OAUTHBEARER, OIDC_OPTIONS, PEM_SETTINGS, PLAIN, PROVIDERS,
    PROVIDER_PACKAGE, SCRAM,
};
use super::settings::{
    Kind, ALWAYS_ON, DEFAULT_CLASSES, EXACTLY_ONCE_SUPPORT, JAVA_ONLY, LIBRDKAFKA_RENAMED,
    LIBRDKAFKA_SAME, MM2_PACKAGE, NOT_NEEDED, OFFSET_STORAGE_TOPIC, POLICIES, POLICY_CLASS,
    POLICY_INTERNAL_SEPARATOR, POLICY_SEPARATOR, SETTINGS,
};
use crate::rules::RESERVED_CLIENT_KEYS;

impl Kind {
    /// How the converter reads a value of this kind, for the reference.
    fn reads(self) -> &'static str {
        match self {
            Kind::List => "comma-separated list → array of strings",
            Kind::Bool => "`true`/`false`, any case → boolean",
            Kind::Seconds => "whole seconds above 0 → `\"<n>s\"`",
            Kind::Millis => "whole milliseconds above 0 → `\"<n>ms\"`",
            Kind::Int => "whole number → integer",
            Kind::Text => "text → string",
            Kind::Largest => "the largest whole number of those set → integer",
        }
    }
}

fn code_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn row(out: &mut String, cells: &[String]) {
    let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
    out.push_str(&format!("| {} |\n", cells.join(" | ")));
}

/// The MM2 key mapping in Markdown.
pub(crate) fn render_reference(header: &str) -> String {
    let mut out = String::from(header);
    out.push_str("# MirrorMaker 2 keys\n\n");
    out.push_str(
        "What `refract convert` (and `refract run`/`check` given a `.properties` file) makes of \
         each MirrorMaker 2 property. Settings resolve as MirrorMaker 2 resolves them: a flow \
         `A->B` runs when `A->B.enabled = true`, and each of its settings is `A->B.<key>` if set, \
         else the top-level `<key>`. A setting the file leaves out takes refract's default (see \
         [Pipeline keys](pipeline.md)). Settings refract ignores are listed in the converted \
         file's header and logged when a `.properties` file is run.\n",
    );

    out.push_str("\n## Clusters and flows\n\n| MM2 property | Pipeline | Notes |\n|---|---|---|\n");
    row(
        &mut out,
        &[
            "`clusters`".into(),
            "`[clusters.<alias>]`".into(),
            "One table per alias; at least two.".into(),
        ],
    );
    row(
        &mut out,
        &[
            "`<alias>.bootstrap.servers` (else top-level `bootstrap.servers`)".into(),
            "`clusters.<alias>.bootstrap`".into(),
            "Required for every alias.".into(),
        ],
    );
    row(&mut out, &["`<alias>.schema.registry.url`".into(), "`clusters.<alias>.schema_registry.url`".into(), "MirrorMaker 2 has no use for it (it copies schema ids as bytes); a flow whose two clusters both name one gets `schemas = \"translate\"`.".into()]);
    row(&mut out, &["`<alias>.schema.registry.basic.auth.user.info`".into(), "`clusters.<alias>.schema_registry.user`, `password`".into(), "`user:password` as Confluent's serializers read it; a reference cannot be split and is left out (noted): set `user` and `password` in the pipeline.".into()]);
    row(&mut out, &["`A->B.enabled`".into(), "`[[flow]] source = \"A\"`, `target = \"B\"`".into(), "Only enabled flows are converted; MM2's heartbeat-only flows for pairs that are not enabled are noted, not converted.".into()]);
    let policies: Vec<String> = POLICIES
        .iter()
        .map(|(class, builtin)| format!("`{class}` → `{builtin}`"))
        .collect();
    row(&mut out, &[format!("`{POLICY_CLASS}`"), "`flow.policy.plugin`".into(), format!("{} (with or without `{MM2_PACKAGE}`); any other class is an error: write the policy as a WebAssembly plugin.", policies.join(", "))]);
    row(
        &mut out,
        &[
            format!("`{POLICY_SEPARATOR}`"),
            "`flow.policy.config.separator`".into(),
            "Read untrimmed, as MM2's policies read it.".into(),
        ],
    );
    row(
        &mut out,
        &[
            format!("`{POLICY_INTERNAL_SEPARATOR}`"),
            "`flow.policy.config.internal_topic_separator_enabled`".into(),
            "Boolean.".into(),
        ],
    );
    row(&mut out, &[format!("`{OFFSET_STORAGE_TOPIC}` (top level, else `<target>.{OFFSET_STORAGE_TOPIC}`)"), "`flow.mm2_offsets_topic`".into(), "Where the MirrorMaker 2 that ran the flow kept its positions: refract resumes from them.".into()]);
    row(&mut out, &[format!("`{EXACTLY_ONCE_SUPPORT}` (top level, else `<target>.{EXACTLY_ONCE_SUPPORT}`)"), "`flow.delivery`".into(), "`enabled` → `\"exactly-once\"`; `preparing` and `disabled` leave the flow at-least-once.".into()]);

    out.push_str("\n## Flow settings\n\n| MM2 property | Pipeline key | Value |\n|---|---|---|\n");
    for setting in SETTINGS {
        let names = match (setting.kind, setting.mm2.split_first()) {
            (Kind::Largest, _) => code_list(setting.mm2),
            (_, Some((name, []))) => format!("`{name}`"),
            (_, Some((name, old))) => format!("`{name}` (3.x name: {})", code_list(old)),
            (_, None) => String::new(),
        };
        row(
            &mut out,
            &[
                names,
                format!("`flow.{}`", setting.toml),
                setting.kind.reads().into(),
            ],
        );
    }

    out.push_str("\n## Client settings\n\n");
    out.push_str(&format!(
        "`<alias>.security.protocol`, `<alias>.ssl.*`, `<alias>.sasl.*` and `<alias>.client.id` go to `[clusters.<alias>.client]`; the top-level `security.protocol`, `ssl.*` and `sasl.*` are the fallback for every cluster; {} go to `[clusters.<alias>.<role>]`. Each Java setting is passed to librdkafka only when librdkafka has one of the same meaning:\n\n",
        ROLES
            .iter()
            .map(|r| format!("`<alias>.{r}.*`"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out.push_str("| Java setting | librdkafka setting |\n|---|---|\n");
    let mut pass: Vec<(&str, &str)> = LIBRDKAFKA_SAME.iter().map(|k| (*k, *k)).collect();
    pass.extend(LIBRDKAFKA_RENAMED.iter().copied());
    pass.extend(PEM_SETTINGS.iter().copied());
    pass.sort();
    for (java, librdkafka) in pass {
        row(&mut out, &[format!("`{java}`"), format!("`{librdkafka}`")]);
    }
    out.push_str(&format!(
        "\nIgnored because refract sets them itself: {}.\n\nReported as Java-only, with what to do instead:\n\n| Java setting | Instead |\n|---|---|\n",
        code_list(RESERVED_CLIENT_KEYS)
    ));
    for (pattern, hint) in JAVA_ONLY {
        row(&mut out, &[format!("`{pattern}`"), hint.to_string()]);
    }
    out.push_str("\nAny other Java client setting is reported as unsupported.\n");

    out.push_str("\n## Security\n\n| MM2 property | Pipeline |\n|---|---|\n");
    let providers: Vec<String> = PROVIDERS
        .iter()
        .map(|(class, _)| format!("`{class}`"))
        .collect();
    row(&mut out, &[
        "`config.providers`, `config.providers.<alias>.class`".into(),
        format!("References stay references: {} (in `{PROVIDER_PACKAGE}`) become `${{file:/path:key}}`, `${{env:NAME}}` and `${{file:/dir/file}}`; another provider class is an error; `config.providers.<alias>.param.*` are ignored.", providers.join(", ")),
    ]);
    let short = |class: &str| class.rsplit('.').next().unwrap_or(class).to_string();
    row(
        &mut out,
        &[
            format!(
                "`sasl.jaas.config` with `{}` or `{}`",
                short(PLAIN),
                short(SCRAM)
            ),
            "`sasl.username`, `sasl.password` (options `username`, `password`)".into(),
        ],
    );
    let oidc: Vec<String> = OIDC_OPTIONS
        .iter()
        .map(|(option, librdkafka, _)| format!("`{option}` → `{librdkafka}`"))
        .collect();
    row(
        &mut out,
        &[
            format!(
                "`sasl.jaas.config` with `{}` and `sasl.oauthbearer.token.endpoint.url`",
                short(OAUTHBEARER)
            ),
            format!("`sasl.oauthbearer.method = \"oidc\"`, {}", oidc.join(", ")),
        ],
    );
    row(&mut out, &[
        format!("`sasl.jaas.config` with `{}` and `unsecuredLoginStringClaim_sub`", short(OAUTHBEARER)),
        "`enable.sasl.oauthbearer.unsecure.jwt = true`, `sasl.oauthbearer.config` (`principal`, `lifeSeconds`, `extension_*`)".into(),
    ]);
    let kerberos: Vec<String> = KERBEROS_OPTIONS
        .iter()
        .map(|(option, librdkafka)| format!("`{option}` → `{librdkafka}`"))
        .collect();
    row(
        &mut out,
        &[
            format!("`sasl.jaas.config` with `{}`", short(KERBEROS)),
            format!(
                "{} (needs refract built with the `gssapi` feature)",
                kerberos.join(", ")
            ),
        ],
    );
    row(&mut out, &[
        "`ssl.truststore.location`".into(),
        "A PEM file: `ssl.ca.location`. JKS and PKCS#12 trust stores are an error naming the command that converts them.".into(),
    ]);
    row(&mut out, &[
        "`ssl.keystore.location`, `ssl.keystore.password`".into(),
        "A PKCS#12 file: `ssl.keystore.location`, `ssl.keystore.password`. JKS and PEM key stores are an error naming what to do.".into(),
    ]);
    out.push_str("\nAny other login module is an error.\n");

    out.push_str(
        "\n## Accepted, ignored or reported\n\n| MM2 property | What refract does |\n|---|---|\n",
    );
    for (key, instead) in ALWAYS_ON {
        row(
            &mut out,
            &[
                format!("`{key}`"),
                format!("Accepted when `true`; `false` is reported: {instead}."),
            ],
        );
    }
    for (key, class) in DEFAULT_CLASSES {
        row(&mut out, &[format!("`{key}`"), format!("Accepted when it is MM2's default, `{class}` (what refract does); any other class is reported as unsupported.")]);
    }
    for (prefixes, reason) in NOT_NEEDED {
        let names: Vec<String> = prefixes.iter().map(|p| format!("`{p}*`")).collect();
        row(&mut out, &[names.join(", "), format!("Ignored: {reason}.")]);
    }
    row(
        &mut out,
        &["anything else".into(), "Reported as unsupported.".into()],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::tests::{assert_page, header};
    use crate::keys::KEYS;

    #[test]
    fn mm2_reference_is_current() {
        let test = "mm2_reference_is_current";
        assert_page("mm2-keys.md", test, &render_reference(&header(test)));
    }

    /// Every flow setting the converter writes is a documented pipeline key.
    #[test]
    fn converted_settings_are_pipeline_keys() {
        for setting in SETTINGS {
            let path = format!("flow.{}", setting.toml);
            assert!(
                KEYS.iter().any(|k| k.path == path),
                "{path} is not in keys::KEYS"
            );
        }
    }
}

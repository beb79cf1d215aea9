//! Security conversion tests: login modules, stores, config providers.

use super::*;
use crate::ClientRole::*;
use std::env::VarError;

const TWO: &str =
    "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\na->b.enabled = true\n";
const PROVIDERS: &str = "config.providers = file, env, dir, secrets\n\
    config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n\
    config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n\
    config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider\n\
    config.providers.secrets.class = FileConfigProvider\n";

fn convert_text(text: &str) -> Result<Mm2Conversion, ConfigError> {
    convert_mm2_properties(Path::new("mm2.properties"), text)
}

fn env(name: &str) -> Result<String, VarError> {
    match name {
        "KS_PASS" => Ok("ks-s3cr3t".into()),
        "SCRAM_PASS" => Ok("scram-s3cr3t".into()),
        _ => Err(VarError::NotPresent),
    }
}

fn load_text(text: &str) -> Result<Pipeline, ConfigError> {
    load_with_env(Path::new("mm2.properties"), text, &env)
}

/// The TOML lines of `[clusters.<alias>.<table>]`.
fn table(toml: &str, alias: &str, table: &str) -> Vec<String> {
    let header = format!("[clusters.{alias}.{table}]");
    toml.lines()
        .skip_while(|l| *l != header)
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.starts_with('['))
        .map(str::to_string)
        .collect()
}

#[test]
fn provider_references_become_refract_references() {
    let text = format!(
        "{TWO}{PROVIDERS}\
         a.ssl.keystore.location = /etc/kafka/a.p12\n\
         a.ssl.keystore.password = ${{env:KS_PASS}}\n\
         a.ssl.key.password = ${{env::KS_PASS}}\n\
         a.ssl.truststore.type = PEM\n\
         a.ssl.truststore.location = ${{dir:/run/secrets:ca.pem}}\n\
         a.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"${{secrets:/etc/kafka/u.properties:user}}\" password=\"${{file:/etc/kafka/u.properties:password}}\";\n\
         config.providers.file.param.allowed.paths = /etc/kafka\n"
    );
    let c = convert_text(&text).unwrap();
    assert_eq!(
        table(&c.toml, "a", "client"),
        [
            "\"sasl.password\" = \"${file:/etc/kafka/u.properties:password}\"",
            "\"sasl.username\" = \"${file:/etc/kafka/u.properties:user}\"",
            "\"ssl.ca.location\" = \"${file:/run/secrets/ca.pem}\"",
            "\"ssl.key.password\" = \"${env:KS_PASS}\"",
            "\"ssl.keystore.location\" = \"/etc/kafka/a.p12\"",
            "\"ssl.keystore.password\" = \"${env:KS_PASS}\"",
        ]
    );
    assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
    assert_eq!(
        c.notes[0],
        "config.providers.file.param.allowed.paths (line 16): ignored; refract's ${file:…} and ${env:…} references read any file and variable the process can"
    );
    assert!(
        !c.notes.iter().any(|n| n.contains("in clear")),
        "{:?}",
        c.notes
    );
}

#[test]
fn provider_errors_name_the_key() {
    let cases: &[(&str, Option<usize>, &str, &str)] = &[
        (
            "config.providers = vault\nconfig.providers.vault.class = com.hashicorp.VaultConfigProvider\n",
            Some(6),
            "config.providers.vault.class",
            "`com.hashicorp.VaultConfigProvider` is a config provider refract cannot run; it reads references of org.apache.kafka.common.config.provider.FileConfigProvider, EnvVarConfigProvider and DirectoryConfigProvider",
        ),
        (
            "config.providers = file\n",
            Some(5),
            "config.providers.file.class",
            "missing; config.providers lists `file`: name its class, e.g. `config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider`",
        ),
        (
            "a.client.id = ${vault:kv/kafka:pw}\n",
            Some(5),
            "a.client.id",
            "holds `${` that is not a reference to a config provider of this file (config.providers lists none); refract would read it as a reference",
        ),
        (
            "config.providers = file\nconfig.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\na.ssl.key.password = ${file:/only-a-path}\n",
            Some(7),
            "a.ssl.key.password",
            "reference `${file:/only-a-path}` does not fit its provider: write ${<alias>:/path/file.properties:key}",
        ),
        (
            "config.providers = env\nconfig.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\ntopics = ${env:TOPICS}\n",
            Some(7),
            "topics",
            "holds a config provider reference; refract resolves references only in client settings and bootstrap.servers",
        ),
    ];
    for (body, line, key, message) in cases {
        let err = convert_text(&format!("{TWO}{body}")).unwrap_err();
        assert_eq!(
            (err.line, err.key.as_str(), err.message.as_str()),
            (*line, *key, *message),
            "{body}"
        );
    }
}

#[test]
fn jaas_login_modules() {
    let jaas = |module: &str| format!("{TWO}sasl.jaas.config = {module}\n");
    // SCRAM, an escaped quote in a literal password (`\\"` in the file: the properties
    // format turns it into the `\"` JAAS reads): carried over as it is, with a note.
    let c = convert_text(&jaas(
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mirror\" password=\"p\\\\\"w\";",
    ))
    .unwrap();
    assert_eq!(
        table(&c.toml, "a", "client"),
        [
            "\"sasl.password\" = 'p\"w'",
            "\"sasl.username\" = \"mirror\""
        ]
    );
    assert_eq!(
        c.notes[0],
        "sasl.jaas.config (line 5): a secret written in clear; the converted pipeline carries it as it is: reference it instead, e.g. ${env:NAME} or ${file:/path:key} (in MirrorMaker 2: config.providers)"
    );
    assert!(!format!("{c:?}").contains("p\\\"w"), "{c:?}");
    assert!(format!("{c:?}").contains("\\\"sasl.password\\\" = \\\"[redacted]\\\""));
    let p = load_text(&jaas("PlainLoginModule required username=u password=pw;")).unwrap();
    let b = p.clusters["b"].client_config(Producer);
    assert_eq!(
        (b["sasl.username"].as_str(), b["sasl.password"].as_str()),
        ("u", "pw")
    );

    // OIDC
    let c = convert_text(&format!(
        "{TWO}a.sasl.mechanism = OAUTHBEARER\na.sasl.oauthbearer.token.endpoint.url = https://idp/token\n\
         a.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
         a.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"mm2\" clientSecret=\"${{env:OIDC}}\" scope=\"kafka\" unsecuredLoginStringClaim_sub=\"x\";\n\
         config.providers = env\nconfig.providers.env.class = EnvVarConfigProvider\n"
    ))
    .unwrap();
    assert_eq!(
        table(&c.toml, "a", "client"),
        [
            "\"sasl.mechanism\" = \"OAUTHBEARER\"",
            "\"sasl.oauthbearer.client.id\" = \"mm2\"",
            "\"sasl.oauthbearer.client.secret\" = \"${env:OIDC}\"",
            "\"sasl.oauthbearer.method\" = \"oidc\"",
            "\"sasl.oauthbearer.scope\" = \"kafka\"",
            "\"sasl.oauthbearer.token.endpoint.url\" = \"https://idp/token\"",
        ]
    );
    assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
    assert_eq!(
        c.notes[0],
        "a.sasl.jaas.config (line 8): options of `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule` ignored: unsecuredLoginStringClaim_sub"
    );

    // Unsecured JWT (tests, development), in a role's table.
    let c = convert_text(&format!(
        "{TWO}a.consumer.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"alice\" unsecuredLoginLifetimeSeconds=\"3600\" unsecuredLoginExtension_traceId=\"123\";\n"
    ))
    .unwrap();
    assert_eq!(
        table(&c.toml, "a", "consumer"),
        [
            "\"enable.sasl.oauthbearer.unsecure.jwt\" = \"true\"",
            "\"sasl.oauthbearer.config\" = \"principal=alice lifeSeconds=3600 extension_traceId=123\"",
        ]
    );
    assert!(table(&c.toml, "a", "client").is_empty());
    assert!(
        c.notes.iter().all(|n| !n.contains("in clear")),
        "{:?}",
        c.notes
    );

    // Kerberos
    let c = convert_text(&format!(
        "{TWO}b.sasl.mechanism = GSSAPI\nb.sasl.jaas.config = com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab=\"/etc/security/mm2.keytab\" principal=\"mm2/host@EXAMPLE.COM\";\n"
    ))
    .unwrap();
    assert_eq!(
        table(&c.toml, "b", "client"),
        [
            "\"sasl.kerberos.keytab\" = \"/etc/security/mm2.keytab\"",
            "\"sasl.kerberos.principal\" = \"mm2/host@EXAMPLE.COM\"",
            "\"sasl.mechanism\" = \"GSSAPI\"",
        ]
    );
    assert_eq!(
        c.notes[0],
        "b.sasl.jaas.config (line 6): Kerberos (GSSAPI) needs refract built with the `gssapi` feature (`cargo build --release --features gssapi`, which links the system's Cyrus SASL); librdkafka renews the ticket with kinit and the keytab"
    );
}

#[test]
fn jaas_errors_name_the_key_and_never_the_secret() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "a.sasl.jaas.config = com.example.CustomLoginModule required password=\"hunter2\";\n",
            "a.sasl.jaas.config",
            "login module `com.example.CustomLoginModule` has no librdkafka equivalent; refract converts PlainLoginModule and ScramLoginModule (sasl.username, sasl.password), OAuthBearerLoginModule (OIDC or unsecured JWT) and Krb5LoginModule (GSSAPI)",
        ),
        (
            "sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required password=\"hunter2\";\n",
            "sasl.jaas.config",
            "login module `org.apache.kafka.common.security.plain.PlainLoginModule` needs the options username and password",
        ),
        (
            "a.producer.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"hunter2;\n",
            "a.producer.sasl.jaas.config",
            "login module `org.apache.kafka.common.security.plain.PlainLoginModule`: the value of option `password` has no closing quote",
        ),
        (
            "a.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n",
            "a.sasl.jaas.config",
            "login module `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule` without sasl.oauthbearer.token.endpoint.url gets its token from a Java callback handler, which librdkafka cannot run: give the OIDC token endpoint (with clientId and clientSecret), or set [clusters.<alias>.oauthbearer] token = \"${file:/path/to/token}\" in the converted pipeline",
        ),
        (
            "a.sasl.oauthbearer.token.endpoint.url = https://idp/token\na.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientSecret=\"hunter2\";\n",
            "a.sasl.jaas.config",
            "login module `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule` with sasl.oauthbearer.token.endpoint.url (OIDC) needs the option clientId (or the setting sasl.oauthbearer.client.credentials.client.id)",
        ),
        (
            "config.providers = file\nconfig.providers.file.class = FileConfigProvider\na.sasl.jaas.config = ${file:/etc/kafka/jaas.properties:jaas}\n",
            "a.sasl.jaas.config",
            "is a config provider reference as a whole; refract reads the login module when it converts the file: write the module here and reference only its secrets, e.g. password=\"${file:/path/credentials.properties:password}\"",
        ),
    ];
    for (body, key, message) in cases {
        let err = convert_text(&format!("{TWO}{body}")).unwrap_err();
        assert_eq!(
            (err.key.as_str(), err.message.as_str()),
            (*key, *message),
            "{body}"
        );
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
    // A Java callback handler without an OIDC endpoint is reported.
    let c = convert_text(&format!(
        "{TWO}sasl.login.callback.handler.class = com.example.Handler\n"
    ))
    .unwrap();
    assert_eq!(c.unsupported, ["sasl.login.callback.handler.class"]);
}

#[test]
fn key_and_trust_stores() {
    let c = convert_text(&format!(
        "{TWO}a.ssl.truststore.location = /etc/kafka/ca.pem\na.ssl.truststore.password = changeit\n\
         a.ssl.keystore.type = PKCS12\na.ssl.keystore.location = /etc/kafka/a.keystore\na.ssl.keystore.password = ${{env:KS_PASS}}\n\
         config.providers = env\nconfig.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n\
         b.ssl.truststore.type = PEM\nb.ssl.truststore.certificates = -----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\n\
         b.ssl.keystore.type = PEM\nb.ssl.keystore.certificate.chain = -----BEGIN CERTIFICATE-----\\nMIIC\\n-----END CERTIFICATE-----\n\
         b.ssl.keystore.key = -----BEGIN ENCRYPTED PRIVATE KEY-----\\nMIIE\\n-----END ENCRYPTED PRIVATE KEY-----\n\
         b.ssl.key.password = ${{env:KEY_PASS}}\nb.ssl.endpoint.identification.algorithm =\n"
    ))
    .unwrap();
    assert_eq!(
        table(&c.toml, "a", "client"),
        [
            "\"ssl.ca.location\" = \"/etc/kafka/ca.pem\"",
            "\"ssl.keystore.location\" = \"/etc/kafka/a.keystore\"",
            "\"ssl.keystore.password\" = \"${env:KS_PASS}\"",
        ]
    );
    assert_eq!(
        table(&c.toml, "b", "client"),
        [
            "\"ssl.ca.pem\" = \"\"\"",
            "-----BEGIN CERTIFICATE-----",
            "MIIB",
            "-----END CERTIFICATE-----\"\"\"",
            "\"ssl.certificate.pem\" = \"\"\"",
            "-----BEGIN CERTIFICATE-----",
            "MIIC",
            "-----END CERTIFICATE-----\"\"\"",
            "\"ssl.endpoint.identification.algorithm\" = \"none\"",
            "\"ssl.key.password\" = \"${env:KEY_PASS}\"",
            "\"ssl.key.pem\" = \"\"\"",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----",
            "MIIE",
            "-----END ENCRYPTED PRIVATE KEY-----\"\"\"",
        ]
    );
    assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
    assert_eq!(
        c.notes,
        [
            "a.ssl.truststore.password (line 6): ignored; librdkafka reads CA certificates from PEM, which has no password",
            "b.ssl.keystore.key (line 16): a secret written in clear; the converted pipeline carries it as it is: reference it instead, e.g. ${env:NAME} or ${file:/path:key} (in MirrorMaker 2: config.providers)",
            "MirrorMaker 2 would also emit heartbeats for b->a, whose flows are not enabled; refract emits heartbeats only in enabled flows",
        ]
    );
    // .p12 without a type is PKCS#12
    let c = convert_text(&format!(
        "{TWO}ssl.keystore.location = /k/a.p12\nssl.keystore.password = pw\n"
    ))
    .unwrap();
    assert_eq!(
        table(&c.toml, "a", "client"),
        [
            "\"ssl.keystore.location\" = \"/k/a.p12\"",
            "\"ssl.keystore.password\" = \"pw\""
        ]
    );
}

#[test]
fn java_stores_are_errors_with_a_hint() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "a.ssl.truststore.location = /etc/kafka/truststore.jks\n",
            "a.ssl.truststore.location",
            "`/etc/kafka/truststore.jks` is a Java KeyStore (JKS) trust store (no type is set and the file name is not .p12, .pfx or .pem, so Kafka reads it as JKS, Java's default); librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert -rfc -alias <alias> -keystore /etc/kafka/truststore.jks -file /etc/kafka/ca.pem` (`keytool -list -keystore /etc/kafka/truststore.jks` lists the aliases), then set ssl.ca.location = \"/etc/kafka/ca.pem\"",
        ),
        (
            "ssl.truststore.type = JKS\nb.ssl.truststore.location = /t/trust.pem\n",
            "b.ssl.truststore.location",
            "`/t/trust.pem` is a Java KeyStore (JKS) trust store; librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert -rfc -alias <alias> -keystore /t/trust.pem -file /t/ca.pem` (`keytool -list -keystore /t/trust.pem` lists the aliases), then set ssl.ca.location = \"/t/ca.pem\"",
        ),
        (
            "a.ssl.truststore.type = PKCS12\na.ssl.truststore.location = /t/trust.p12\n",
            "a.ssl.truststore.location",
            "`/t/trust.p12` is a PKCS#12 trust store; librdkafka has no trust stores and reads CA certificates from PEM: `openssl pkcs12 -in /t/trust.p12 -nokeys -out /t/ca.pem`, then set ssl.ca.location to that file",
        ),
        (
            "a.ssl.keystore.location = /k/client.keystore.jks\na.ssl.keystore.password = hunter2\n",
            "a.ssl.keystore.location",
            "`/k/client.keystore.jks` is a Java KeyStore (JKS) (no type is set and the file name is not .p12, .pfx or .pem, so Kafka reads it as JKS, Java's default); librdkafka cannot read Java KeyStores (JKS); convert it to PKCS#12 with `keytool -importkeystore -srckeystore /k/client.keystore.jks -destkeystore /k/client.keystore.p12 -deststoretype PKCS12`, then set ssl.keystore.location = \"/k/client.keystore.p12\" and ssl.keystore.password",
        ),
        (
            "a.ssl.keystore.type = PEM\na.ssl.keystore.location = /k/client.pem\n",
            "a.ssl.keystore.location",
            "`/k/client.pem` is a PEM key store; librdkafka reads the certificate and the private key from separate settings: set ssl.certificate.location to the certificate chain and ssl.key.location to the private key (with ssl.key.password if it is encrypted), or put the PEM text in ssl.keystore.certificate.chain and ssl.keystore.key",
        ),
        (
            "a.ssl.keystore.type = BCFKS\na.ssl.keystore.location = /k/client.bcfks\n",
            "a.ssl.keystore.location",
            "`BCFKS` is a key store type librdkafka cannot read (it reads PEM and PKCS12)",
        ),
    ];
    for (body, key, message) in cases {
        let err = convert_text(&format!("{TWO}{body}")).unwrap_err();
        assert_eq!(
            (err.key.as_str(), err.message.as_str()),
            (*key, *message),
            "{body}"
        );
        assert!(!err.to_string().contains("hunter2"));
    }
}

#[test]
fn compression_settings() {
    let three = "clusters = a, b, c\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\nc.bootstrap.servers = h:3\na->b.enabled = true\na->c.enabled = true\n";
    let p = load_text(&format!(
        "{three}producer.compression.type = lz4\na->c.producer.compression.type = zstd\nb.producer.compression.type = gzip\n"
    ))
    .unwrap();
    let got: Vec<Option<&str>> = p
        .flows
        .iter()
        .map(|f| f.delivery.compression.as_deref())
        .collect();
    assert_eq!(got, [Some("lz4"), Some("zstd")]);
    assert_eq!(
        p.clusters["b"].client_config(Producer)["compression.type"],
        "gzip"
    );
    assert!(
        p.warnings.iter().all(|w| !w.contains("compression")),
        "{:?}",
        p.warnings
    );
    let p = load_text(TWO).unwrap();
    assert_eq!(p.flows[0].delivery.compression, None);
    let err = load_text(&format!("{TWO}a->b.producer.compression.type = brotli\n")).unwrap_err();
    assert_eq!(err.key, "a->b.producer.compression.type");
    assert_eq!(err.line, Some(5));
    assert_eq!(
        err.message,
        "unknown value `brotli` (use \"none\", \"gzip\", \"snappy\", \"lz4\" or \"zstd\") (converted to `flow[0].compression`)"
    );
}

#[test]
fn convert_keeps_references_and_load_resolves_them() {
    let text = format!(
        "{TWO}{PROVIDERS}a.security.protocol = SASL_SSL\na.sasl.mechanism = SCRAM-SHA-512\n\
         a.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mm2\" password=\"${{env:SCRAM_PASS}}\";\n\
         a.ssl.keystore.location = /k/a.p12\na.ssl.keystore.password = ${{env:KS_PASS}}\n"
    );
    let c = convert_text(&text).unwrap();
    assert!(
        c.toml.contains("\"sasl.password\" = \"${env:SCRAM_PASS}\""),
        "{}",
        c.toml
    );
    assert!(c
        .toml
        .contains("\"ssl.keystore.password\" = \"${env:KS_PASS}\""));
    assert!(!c.toml.contains("s3cr3t"));
    let p = load_text(&text).unwrap();
    let a = &p.clusters["a"];
    let cfg = a.client_config(Admin);
    assert_eq!(cfg["sasl.password"], "scram-s3cr3t");
    assert_eq!(cfg["ssl.keystore.password"], "ks-s3cr3t");
    let shown = a.display_settings(Admin);
    assert_eq!(shown["sasl.password"], "${env:SCRAM_PASS}");
    assert_eq!(shown["ssl.keystore.password"], "${env:KS_PASS}");
    assert!(!format!("{p:?}").contains("s3cr3t"));
    // An unset variable: the error names the MM2 key, the reference, never a secret.
    let err = load_text(&text.replace("SCRAM_PASS", "UNSET_PASS")).unwrap_err();
    assert_eq!(err.key, "a.sasl.jaas.config");
    assert_eq!(err.line, Some(12));
    assert_eq!(
        err.message,
        "reference `${env:UNSET_PASS}`: environment variable `UNSET_PASS` is not set (converted to `clusters.a.client.\"sasl.password\"`)"
    );
    assert!(!err.to_string().contains("s3cr3t"));
}

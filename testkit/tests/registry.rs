//! The schema-registry kit against real Apicurio Registries (`.ci/install-apicurio`): schemas
//! registered and read back, references, compatibility levels, ids numbered by each registry on
//! its own, and a kill and restart that keep what was registered. One test, so the binary starts two registries (in
//! parallel) and restarts one, rather than a registry per test.

use refract_testkit::Registry;

/// As Apicurio gives AVRO back (Avro's `Schema.toString()`: compact, `type` first).
const ORDER_AVRO: &str = r#"{"type":"record","name":"Order","namespace":"acme","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}"#;

const MONEY_PROTO: &str = "syntax = \"proto3\";\npackage acme.common;\n\nmessage Money {\n  string currency = 1;\n  int64 units = 2;\n}\n";

const PAYMENT_PROTO: &str = "syntax = \"proto3\";\npackage acme.payments;\n\nimport \"acme/common/money.proto\";\n\n// A payment.\nmessage Payment {\n  string id = 1;\n  acme.common.Money amount = 2;\n}\n";

/// What the test registers on a registry: (AVRO id, Money id, Payment id).
fn register_all(registry: &Registry) -> (u32, u32, u32) {
    let order = registry.register("orders-value", ORDER_AVRO, "AVRO", &[]);
    let money = registry.register("money-value", MONEY_PROTO, "PROTOBUF", &[]);
    let payment = registry.register(
        "payments-value",
        PAYMENT_PROTO,
        "PROTOBUF",
        &[("acme/common/money.proto", "money-value", 1)],
    );
    (order, money, payment)
}

#[test]
fn registries_keep_avro_and_protobuf_with_references_and_number_ids_on_their_own() {
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(Registry::start);
        let b = s.spawn(Registry::start);
        (a.join().expect("registry a"), b.join().expect("registry b"))
    });
    assert_ne!(a.url(), b.url());
    assert!(a.url().ends_with("/apis/ccompat/v7"), "{}", a.url());

    // A schema on `a` only, so the same schemas get other ids there than on `b`.
    assert_eq!(a.register("dummy-value", "\"string\"", "AVRO", &[]), 1);
    let on_a = register_all(&a);
    let on_b = register_all(&b);
    assert_eq!(on_a, (2, 3, 4));
    assert_eq!(on_b, (1, 2, 3));

    for (registry, (order, money, payment)) in [(&a, on_a), (&b, on_b)] {
        assert_eq!(
            registry.schema_by_id(order),
            Some((ORDER_AVRO.to_string(), "AVRO".to_string()))
        );
        assert_eq!(
            registry.schema_by_id(money),
            Some((MONEY_PROTO.to_string(), "PROTOBUF".to_string()))
        );
        // PROTOBUF text comes back byte for byte, its comment too, with its reference.
        assert_eq!(
            registry.schema_by_id(payment),
            Some((PAYMENT_PROTO.to_string(), "PROTOBUF".to_string()))
        );
        assert_eq!(
            registry.references(payment),
            [(
                "acme/common/money.proto".to_string(),
                "money-value".to_string(),
                1
            )]
        );
        assert!(registry.references(money).is_empty());
        assert_eq!(registry.schema_by_id(99), None);
    }
    assert_eq!(
        a.subjects(),
        [
            "dummy-value",
            "money-value",
            "orders-value",
            "payments-value"
        ]
    );

    // The same schema again, even spaced out, is the same id and no new version.
    let spaced = ORDER_AVRO.replace(',', ", ").replace(':', ": ");
    assert_eq!(b.register("orders-value", &spaced, "AVRO", &[]), on_b.0);
    assert_eq!(b.versions("orders-value"), [1]);
    assert!(b.versions("no-such-subject").is_empty());

    // Compatibility: none of its own until set; an incompatible schema refused with 409.
    assert_eq!(b.compatibility("orders-value"), None);
    b.set_compatibility("orders-value", "BACKWARD");
    assert_eq!(b.compatibility("orders-value").as_deref(), Some("BACKWARD"));
    let required = r#"{"type":"record","name":"Order","namespace":"acme","fields":[{"name":"id","type":"long"},{"name":"qty","type":"int"}]}"#;
    let refused = b
        .try_register("orders-value", required, "AVRO", &[])
        .expect_err("a new field without a default is not BACKWARD compatible");
    assert_eq!(refused.status, 409, "{refused}");
    assert_eq!(b.versions("orders-value"), [1]);

    // A kill and a restart on the same port keep what it held, and ids go on from there.
    let url = b.url();
    let subjects = b.subjects();
    let before = b.schema_by_id(on_b.0);
    assert!(before.is_some());
    b.restart();
    assert_eq!(b.url(), url);
    assert_eq!(b.subjects(), subjects);
    assert_eq!(b.schema_by_id(on_b.0), before);
    let next = b.register("restarted-value", "\"bytes\"", "AVRO", &[]);
    assert!(next > on_b.2, "ids start again after a restart: {next}");
    // `a` is untouched by all of it.
    assert_eq!(
        a.schema_by_id(on_a.2).map(|(_, kind)| kind).as_deref(),
        Some("PROTOBUF")
    );
}

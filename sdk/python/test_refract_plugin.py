"""Native tests of refract_plugin (python3 -m pytest sdk/python -q).

The MirrorMaker 2 cases are those of the Rust SDK's tests (plugins/sdk/src/mm2.rs, config.rs,
worlds/policy/src/record.rs, __private.rs); the example policies' table is
examples/plugins/policy-cases.json.
"""

import importlib.util
import json
import pathlib

import pytest

import refract_plugin as rp
from refract_plugin import (
    Config,
    ConfigError,
    DefaultReplicationPolicy,
    Failed,
    Filter,
    Header,
    IdentityReplicationPolicy,
    OutputRecord,
    Policy,
    Record,
    Transform,
    Unsupported,
    drop,
    export_filter,
    export_policy,
    export_transform,
    keep,
    reject,
    replace,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
W = rp._bindings()  # the native stand-ins for the generated bindings
T = W.types


def policy(separator=".", internal_enabled=True):
    return DefaultReplicationPolicy(separator, internal_enabled)


def configured(cls, text):
    instance = cls()
    config = Config.parse(text)
    instance.configure(config)
    config.finish()
    return instance


def wit_error(excinfo):
    """The WIT plugin-error an export raised, as (case, text)."""
    value = excinfo.value.value
    case = {
        T.PluginError_InvalidConfig: "invalid-config",
        T.PluginError_Unsupported: "unsupported",
        T.PluginError_Failed: "failed",
    }[type(value)]
    return case, value.value


def is_cycle(p, target, topic):
    """MirrorMaker 2's MirrorSourceConnector.isCycle."""
    source = p.topic_source(topic)
    if source is None:
        return False
    if source == target:
        return True
    upstream = p.upstream_topic(topic)
    if upstream is None or upstream == topic:
        return False
    return is_cycle(p, target, upstream)


# --- MirrorMaker 2 policies ---------------------------------------------------------------------

SPLIT_CASES = [
    (".", "topic1", None, None),
    (".", "", None, None),
    (".", ".", None, None),
    (".", "..", None, None),
    (".", "a.", None, None),
    (".", "a..", None, None),
    (".", ".b", "", "b"),
    (".", "..b", "", ".b"),
    (".", "a.b", "a", "b"),
    (".", "a.b.c", "a", "b.c"),
    (".", "a..b", "a", ".b"),
    (".", "a.b.", "a", "b."),
    (".", "source1.topic4", "source1", "topic4"),
    (".", "source1.source2.topic5", "source1", "source2.topic5"),
    (".", "target.source.topic1", "target", "source.topic1"),
    (".", "source.target.topic1", "source", "target.topic1"),
    (".", "us-west.heartbeats", "us-west", "heartbeats"),
    ("__", "source1__topic4", "source1", "topic4"),
    ("__", "source1__source2__topic5", "source1", "source2__topic5"),
    ("__", "source1_topic4", None, None),
    ("__", "a___b", "a", "_b"),
    ("__", "a____b", "a", "__b"),
    ("__", "a__", None, None),
    ("__", "a____", None, None),
    ("__", "__b", "", "b"),
    ("-", "us-west.topic1", "us", "west.topic1"),
    ("::", "a::b", "a", "b"),
    ("é", "aébéc", "a", "béc"),
]


@pytest.mark.parametrize("separator,topic,source,upstream", SPLIT_CASES)
def test_topic_source_and_upstream_follow_java_split(separator, topic, source, upstream):
    p = policy(separator)
    assert p.topic_source(topic) == source
    assert p.upstream_topic(topic) == upstream


@pytest.mark.parametrize(
    "separator,source,topic,remote",
    [
        (".", "us-west", "topic1", "us-west.topic1"),
        (".", "primary", "heartbeats", "primary.heartbeats"),
        (".", "b", "a.topic1", "b.a.topic1"),
        ("__", "source1", "topic4", "source1__topic4"),
        ("-", "A", "", "A-"),
    ],
)
def test_format_remote_topic_prepends_source_and_separator(separator, source, topic, remote):
    p = policy(separator)
    assert p.format_remote_topic(source, topic) == remote
    if topic:
        assert p.topic_source(remote) == source
        assert p.upstream_topic(remote) == topic


@pytest.mark.parametrize(
    "separator,internal_enabled,offset_syncs,checkpoints",
    [
        ("__", True, "mm2-offset-syncs__CLUSTER__internal", "CLUSTER__checkpoints__internal"),
        ("__", False, "mm2-offset-syncs.CLUSTER.internal", "CLUSTER.checkpoints.internal"),
        (".", True, "mm2-offset-syncs.CLUSTER.internal", "CLUSTER.checkpoints.internal"),
        (".", False, "mm2-offset-syncs.CLUSTER.internal", "CLUSTER.checkpoints.internal"),
        ("_", True, "mm2-offset-syncs_CLUSTER_internal", "CLUSTER_checkpoints_internal"),
    ],
)
def test_internal_topic_names(separator, internal_enabled, offset_syncs, checkpoints):
    p = policy(separator, internal_enabled)
    assert p.offset_syncs_topic("CLUSTER") == offset_syncs
    assert p.checkpoints_topic("CLUSTER") == checkpoints
    assert p.heartbeats_topic() == "heartbeats"
    assert p.is_internal_topic(offset_syncs)
    assert p.is_internal_topic(checkpoints)
    assert p.is_mm2_internal_topic(offset_syncs)
    assert p.is_checkpoints_topic(checkpoints)
    assert not p.is_checkpoints_topic(offset_syncs)
    assert not p.is_internal_topic("heartbeats")


@pytest.mark.parametrize(
    "separator,internal_enabled,topic,internal",
    [
        ("__", True, "__consumer_offsets", True),
        ("__", True, ".hiddentopic", True),
        ("__", True, "mm2-offsets.CLUSTER.internal", True),
        ("__", True, "mm2-offsets-CLUSTER-internal", True),
        ("__", True, "mm2-offsets_CLUSTER_internal", False),
        ("__", True, "mm2-offsets__CLUSTER__internal", True),
        ("__", False, "mm2-offsets__CLUSTER__internal", False),
        ("_", True, "mm2-offsets_CLUSTER_internal", True),
        ("_", False, "mm2-offsets_CLUSTER_internal", False),
        (".", True, "mm2-offsets_CLUSTER_internal", False),
        (".", True, "connect-configs", False),
        (".", True, "internal", False),
        (".", True, "topic1", False),
        (".", True, "_single_underscore", False),
        (".", True, "source.topic1", False),
        (".", True, "source.heartbeats", False),
        (".", True, "x.internal", True),
    ],
)
def test_is_internal_topic_follows_mm2(separator, internal_enabled, topic, internal):
    assert policy(separator, internal_enabled).is_internal_topic(topic) is internal


def test_policy_defaults_match_the_dotted_default_policy():
    class Bare(Policy):
        def format_remote_topic(self, source_cluster, topic):
            return topic

        def topic_source(self, topic):
            return None

        def upstream_topic(self, topic):
            return None

    bare, dotted = Bare(), DefaultReplicationPolicy()
    for topic in ["__consumer_offsets", ".hidden", "a-internal", "a.internal", "a_internal", "topic1"]:
        assert bare.is_internal_topic(topic) == dotted.is_internal_topic(topic)
    assert bare.heartbeats_topic() == dotted.heartbeats_topic()
    assert bare.offset_syncs_topic("A") == dotted.offset_syncs_topic("A")
    assert bare.checkpoints_topic("A") == dotted.checkpoints_topic("A")


@pytest.mark.parametrize(
    "topic,cycle",
    [
        ("target.topic1", True),
        ("target.source.topic1", True),
        ("source.target.topic1", True),
        ("source.target.source.topic1", True),
        ("topic1", False),
        ("source.topic1", False),
        ("other.source.topic1", False),
        ("target.", False),
    ],
)
def test_default_policy_detects_cycles_like_mm2(topic, cycle):
    assert is_cycle(DefaultReplicationPolicy(), "target", topic) is cycle


def test_identity_policy_follows_mm2():
    p = IdentityReplicationPolicy()
    assert p.format_remote_topic("primary", "topic1") == "topic1"
    assert p.format_remote_topic("primary", "a.b") == "a.b"
    assert p.topic_source("topic1") is None
    assert p.topic_source("primary.topic1") is None
    assert p.upstream_topic("primary.topic1") is None
    assert p.format_remote_topic("backup", "heartbeats") == "backup.heartbeats"
    assert p.format_remote_topic("backup", "primary.heartbeats") == "backup.primary.heartbeats"
    assert p.format_remote_topic("backup", "myheartbeats") == "backup.myheartbeats"
    assert p.topic_source("backup.heartbeats") == "backup"
    assert p.upstream_topic("backup.heartbeats") == "heartbeats"
    assert p.topic_source("heartbeats") is None
    assert p.heartbeats_topic() == "heartbeats"
    assert p.offset_syncs_topic("A") == "mm2-offset-syncs.A.internal"
    assert p.checkpoints_topic("A") == "A.checkpoints.internal"
    for topic, cycle in [
        ("target.topic1", False),
        ("target.source.topic1", False),
        ("source.target.topic1", False),
        ("topic1", False),
        ("othersource.topic1", False),
        ("target.heartbeats", True),
        ("target.source.heartbeats", True),
        ("source.target.heartbeats", True),
        ("heartbeats", False),
        ("othersource.heartbeats", False),
    ]:
        assert is_cycle(p, "target", topic) is cycle, topic


def test_identity_policy_uses_the_configured_separator_for_heartbeats():
    p = configured(
        IdentityReplicationPolicy, 'separator = "__"\ninternal_topic_separator_enabled = false'
    )
    assert p.format_remote_topic("A", "heartbeats") == "A__heartbeats"
    assert p.format_remote_topic("A", "orders") == "orders"
    assert p.topic_source("A__heartbeats") == "A"
    assert p.upstream_topic("B__A__heartbeats") == "A__heartbeats"
    assert p.offset_syncs_topic("A") == "mm2-offset-syncs.A.internal"


def test_policy_config_is_read_and_checked(capsys):
    p = configured(DefaultReplicationPolicy, "")
    assert (p.separator, p.internal_topic_separator_enabled) == (".", True)
    p = configured(DefaultReplicationPolicy, 'separator = "__"')
    assert (p.separator, p.internal_topic_separator_enabled) == ("__", True)
    p = configured(DefaultReplicationPolicy, 'separator = "__"\ninternal_topic_separator_enabled = false')
    assert (p.separator, p.internal_topic_separator_enabled) == ("__", False)
    assert "[info] using custom remote topic separator `__`" in capsys.readouterr().err
    for text, message in [
        ('separator = ""', "separator: must not be empty"),
        ("separator = 1", "separator: expected a string, found integer"),
        (
            'internal_topic_separator_enabled = "false"',
            "internal_topic_separator_enabled: expected a boolean, found string",
        ),
        (
            'replication.policy.separator = "_"',
            "replication: unknown key; expected one of: internal_topic_separator_enabled, separator",
        ),
    ]:
        with pytest.raises(ConfigError) as excinfo:
            configured(DefaultReplicationPolicy, text)
        assert excinfo.value.message == message
    with pytest.raises(ConfigError, match=r"^sep: unknown key; expected one of: "):
        configured(IdentityReplicationPolicy, 'sep = "_"')
    with pytest.raises(ConfigError, match="^separator: must not be empty$"):
        DefaultReplicationPolicy("", True)
    with pytest.raises(ConfigError, match="^TOML parse error"):
        configured(DefaultReplicationPolicy, "separator = ")


# --- Config -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "  \n", "# only a comment\n"])
def test_empty_text_is_an_empty_table(text):
    Config.parse(text).finish()


def test_syntax_errors_give_the_position():
    with pytest.raises(ConfigError) as excinfo:
        Config.parse("a = 1\nb = \n")
    assert excinfo.value.message.startswith("TOML parse error at line 2, column"), excinfo.value
    assert "\n" not in excinfo.value.message


def test_reads_typed_values():
    table = Config.parse('s = "x"\nb = false\ni = 3\nf = 1.5\nl = [1, "a"]\n[t]\nk = "v"\n')
    assert table.string("s") == "x"
    assert table.bool("b") is False
    assert table.int("i") == 3
    assert table.float("f") == 1.5
    assert table.list("l") == [1, "a"]
    assert table.string("absent") is None
    assert table.string("absent2", "dflt") == "dflt"
    assert table.bool("absent3", True) is True
    nested = table.table("t")
    assert nested.path == "t"
    assert nested.required_string("k") == "v"
    with pytest.raises(ConfigError, match=r"^t\.m: missing$"):
        nested.required_string("m")
    nested.finish()
    table.finish()
    assert Config({"n": 2}).float("n") == 2.0


def test_wrong_types_name_the_key():
    table = Config.parse('s = 1\nb = "yes"\ni = true\nf = "x"\nl = 1\nd = 1979-05-27T07:32:00Z\n')
    for getter, key, message in [
        (table.string, "s", "s: expected a string, found integer"),
        (table.bool, "b", "b: expected a boolean, found string"),
        (table.int, "i", "i: expected an integer, found boolean"),
        (table.float, "f", "f: expected a number, found string"),
        (table.list, "l", "l: expected an array, found integer"),
        (table.string, "d", "d: expected a string, found datetime"),
    ]:
        with pytest.raises(ConfigError) as excinfo:
            getter(key)
        assert excinfo.value.message == message


def test_arrays_of_tables_count_from_one():
    table = Config.parse('[[r]]\na = "1"\n[[r]]\nb = "2"\n')
    entries = table.tables("r")
    assert [entry.path for entry in entries] == ["r[1]", "r[2]"]
    with pytest.raises(ConfigError, match=r"^r\[2\]\.a: missing$"):
        entries[1].required_string("a")
    with pytest.raises(ConfigError, match=r"^r\[2\]\.b: unknown key; expected one of: a$"):
        entries[1].finish()
    with pytest.raises(ConfigError, match=r"^r\[2\]: expected a table, found integer$"):
        Config.parse('r = [{ a = "1" }, 5]').tables("r")
    with pytest.raises(ConfigError, match=r"^r: expected an array of tables, found integer$"):
        Config.parse("r = 5").tables("r")


def test_unknown_keys_are_rejected():
    table = Config.parse('separator = "_"\nseperator = "-"\n')
    table.string("separator")
    table.bool("internal_topic_separator_enabled")
    with pytest.raises(ConfigError) as excinfo:
        table.finish()
    assert excinfo.value.message == (
        "seperator: unknown key; expected one of: internal_topic_separator_enabled, separator"
    )
    with pytest.raises(ConfigError, match="^x: unknown key; no keys are accepted here$"):
        Config.parse("x = 1").finish()


def test_reads_string_arrays_and_tables():
    table = Config.parse(
        'a = ["x", "y"]\nb = ["x", 2]\nc = 1\n[t]\nz = "1"\ny = "2"\n[u]\nv = true\n'
    )
    assert table.strings("a") == ["x", "y"]
    with pytest.raises(ConfigError, match=r"^b\[2\]: expected a string, found integer$"):
        table.strings("b")
    with pytest.raises(ConfigError, match=r"^c: expected an array of strings, found integer$"):
        table.strings("c")
    assert list(table.string_table("t").items()) == [("y", "2"), ("z", "1")]
    with pytest.raises(ConfigError, match=r"^u\.v: expected a string, found boolean$"):
        table.string_table("u")
    assert table.strings("absent") is None
    assert table.string_table("absent") is None
    assert table.string_table("absent", {}) == {}


def test_quoted_keys_arrive_as_written():
    table = Config.parse('[renames]\n"orders-v1" = "orders"\n"a.b" = "c"\n')
    assert table.string_table("renames") == {"a.b": "c", "orders-v1": "orders"}


# --- records and outcomes -----------------------------------------------------------------------


def record(key=None, value=None, headers=()):
    return Record(3, 42, 1000, key, value, headers)


def test_header_lookup_takes_the_last_header():
    r = record(
        headers=[
            Header("env", b"prod"),
            Header("trace", None),
            Header("env", b"test"),
            Header("bin", b"\xff\xfe"),
        ]
    )
    for name, value, text, present in [
        ("env", b"test", "test", True),
        ("trace", None, None, True),
        ("bin", b"\xff\xfe", None, True),
        ("absent", None, None, False),
    ]:
        assert r.header(name) == value, name
        assert r.header_str(name) == text, name
        assert r.has_header(name) is present, name
        assert (r.header_entry(name) is not None) is present, name
    assert len(r.headers_named("env")) == 2


@pytest.mark.parametrize(
    "raw,text", [(b"k1", "k1"), (b"", ""), (b"\xc3\x28", None), (None, None)]
)
def test_keys_and_values_as_text(raw, text):
    r = record(raw, raw)
    assert r.key_str() == text
    assert r.value_str() == text
    assert r.is_tombstone() is (raw is None)


def test_outputs_copy_the_record_and_default_the_rest():
    r = record(b"k", None, [Header("h", None)])
    out = r.to_output()
    assert out == OutputRecord(b"k", None, [Header("h", None)])
    assert (out.topic, out.partition, out.timestamp_ms) == (None, None, None)
    changed = (
        r.to_output(topic="t2", partition=0, timestamp_ms=7, key=None, value="v")
        .with_header("a", "1")
        .without_header("h")
    )
    assert (changed.topic, changed.partition, changed.timestamp_ms) == ("t2", 0, 7)
    assert (changed.key, changed.value) == (None, b"v")
    assert changed.headers == [Header("a", b"1")]
    assert r.headers == [Header("h", None)], "the input record is unchanged"
    assert replace(changed) == replace([changed])
    assert replace(changed).records == [changed]
    assert reject("bad").reason == "bad"
    assert keep().kind == "keep" and drop().kind == "drop"
    with pytest.raises(TypeError):
        replace("not a record")


# --- the exported classes (glue) ----------------------------------------------------------------


class Prefixed(Policy):
    NAME = "prefixed"
    VERSION = "1.2.3"

    def configure(self, config):
        super().configure(config)
        self.prefix = config.string("prefix", "mirror")
        self.boom = config.bool("boom", False)

    def format_remote_topic(self, source_cluster, topic):
        if self.boom:
            raise ValueError(f"cannot name {topic}")
        if topic == "unsupported":
            raise Unsupported("no such thing")
        if topic == "failed":
            raise Failed("exactly this")
        if topic == "none":
            return None
        return f"{self.prefix}-{topic}"

    def topic_source(self, topic):
        return None

    def upstream_topic(self, topic):
        return None

    def offset_syncs_topic(self, cluster_alias):
        if cluster_alias == "boom":
            raise KeyError(cluster_alias)
        return super().offset_syncs_topic(cluster_alias)


def test_calls_before_init_fail():
    _, Policy_ = export_policy(DefaultReplicationPolicy)
    p = Policy_()
    for call in [
        lambda: p.format_remote_topics("a", ["t"]),
        lambda: p.topic_sources(["a.t"]),
        lambda: p.upstream_topics(["a.t"]),
        lambda: p.is_internal_topics(["t"]),
    ]:
        with pytest.raises(W.Err) as excinfo:
            call()
        assert wit_error(excinfo) == ("failed", "init was not called")
    for call in [
        p.heartbeats_topic,
        lambda: p.offset_syncs_topic("A"),
        lambda: p.checkpoints_topic("A"),
    ]:
        with pytest.raises(RuntimeError, match="init was not called"):
            call()


def test_info_names_the_class():
    life, _ = export_policy(Prefixed)
    assert life().info() == T.PluginInfo(name="prefixed", version="1.2.3")

    class SameName(DefaultReplicationPolicy):
        def format_remote_topic(self, source_cluster, topic):
            return topic

    life, _ = export_policy(SameName)
    assert life().info() == T.PluginInfo(name="same-name", version="0.0.0")
    life, _ = export_policy(IdentityReplicationPolicy)
    assert life().info().name == "identity-replication-policy"


def test_batches_answer_in_input_order():
    life, pol = export_policy(DefaultReplicationPolicy)
    life().init('separator = "_"')
    p = pol()
    topics = ["b_x", "plain", "_y", "c_d_e"]
    assert p.format_remote_topics("src", topics) == ["src_b_x", "src_plain", "src__y", "src_c_d_e"]
    assert p.topic_sources(topics) == ["b", None, "", "c"]
    assert p.upstream_topics(topics) == ["x", None, "y", "d_e"]
    assert p.is_internal_topics(["__x", "t", "a_internal"]) == [True, False, True]
    assert p.heartbeats_topic() == "heartbeats"
    assert p.offset_syncs_topic("A") == "mm2-offset-syncs_A_internal"
    assert p.checkpoints_topic("A") == "A_checkpoints_internal"


def test_init_errors(capsys):
    life, pol = export_policy(Prefixed)
    for text, expected in [
        ("prefix = 1", ("invalid-config", "prefix: expected a string, found integer")),
        ("x = 1", ("invalid-config", "x: unknown key; expected one of: boom, prefix")),
        ("prefix = ", None),
    ]:
        with pytest.raises(W.Err) as excinfo:
            life().init(text)
        case, message = wit_error(excinfo)
        assert case == "invalid-config"
        if expected:
            assert (case, message) == expected
        else:
            assert message.startswith("TOML parse error at line 1"), message
    # a failed init keeps the slot empty
    with pytest.raises(W.Err) as excinfo:
        pol().format_remote_topics("a", ["t"])
    assert wit_error(excinfo) == ("failed", "init was not called")

    class Broken(DefaultReplicationPolicy):
        def configure(self, config):
            raise ZeroDivisionError("division by zero")

    life, _ = export_policy(Broken)
    with pytest.raises(W.Err) as excinfo:
        life().init("")
    assert wit_error(excinfo) == ("failed", "ZeroDivisionError: division by zero")
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in configure" in err


def test_exceptions_become_failed_errors(capsys):
    life, pol = export_policy(Prefixed)
    life().init("")
    p = pol()
    assert p.format_remote_topics("a", ["t"]) == ["mirror-t"]
    for topic, expected in [
        ("unsupported", ("unsupported", "no such thing")),
        ("failed", ("failed", "exactly this")),
        ("none", ("failed", "TypeError: format_remote_topic('none') returned NoneType, expected str")),
    ]:
        with pytest.raises(W.Err) as excinfo:
            p.format_remote_topics("a", ["t", topic])
        assert wit_error(excinfo) == expected
    life().init("boom = true")
    with pytest.raises(W.Err) as excinfo:
        p.format_remote_topics("a", ["orders"])
    assert wit_error(excinfo) == ("failed", "ValueError: cannot name orders")
    err = capsys.readouterr().err
    assert "Traceback (most recent call last):\n" in err
    assert "in format_remote_topic\nValueError: cannot name orders\n" in err
    assert "[debug] Traceback (most recent call last):" in err
    # no error channel: logged, then the exception propagates (the component traps)
    with pytest.raises(KeyError):
        p.offset_syncs_topic("boom")
    assert "[error] offset_syncs_topic: KeyError: 'boom'" in capsys.readouterr().err


def test_tracebacks_follow_the_exception_chain():
    try:
        try:
            {}["k"]
        except KeyError as exc:
            raise ValueError("outer") from exc
    except ValueError as exc:
        text = rp._format_traceback(exc)
    assert text.startswith("Traceback (most recent call last):\n  File ")
    assert "KeyError: 'k'\n\nThe above exception was the direct cause" in text
    assert text.endswith("in test_tracebacks_follow_the_exception_chain\nValueError: outer\n")


def test_export_rejects_what_is_not_a_plugin_class():
    with pytest.raises(TypeError, match="expected a class"):
        export_policy(DefaultReplicationPolicy())

    class Half:
        def format_remote_topic(self, source_cluster, topic):
            return topic

    with pytest.raises(TypeError, match="Half lacks topic_source, upstream_topic"):
        export_policy(Half)


class _WitRecord:
    def __init__(self, offset, key=None, value=None, headers=()):
        self.partition, self.offset, self.timestamp_ms = 0, offset, 1000 + offset
        self.key, self.value = key, value
        self.headers = [T.Header(k, v) for k, v in headers]


class _WitBatch:
    def __init__(self, records):
        self.source_cluster, self.topic, self.target_topic = "A", "t", "A.t"
        self.records = records


class DropTest(Filter):
    def configure(self, config):
        self.header = config.string("header", "env")

    def keep(self, batch, record):
        if record.header_str("explode") is not None:
            raise RuntimeError(record.header_str("explode"))
        return record.header(self.header) != b"test"


def test_filter_export():
    life, flt = export_filter(DropTest)
    assert life().info().name == "drop-test"
    with pytest.raises(W.Err) as excinfo:
        flt().filter(_WitBatch([]))
    assert wit_error(excinfo) == ("failed", "init was not called")
    life().init("")
    batch = _WitBatch(
        [
            _WitRecord(0, headers=[("env", b"test")]),
            _WitRecord(1, headers=[("env", b"prod")]),
            _WitRecord(2),
            _WitRecord(3, headers=[("env", None)]),
        ]
    )
    assert flt().filter(batch) == [False, True, True, True]
    with pytest.raises(W.Err) as excinfo:
        flt().filter(_WitBatch([_WitRecord(0, headers=[("explode", b"bang")])]))
    assert wit_error(excinfo) == ("failed", "RuntimeError: bang")

    class Short(DropTest):
        def filter_batch(self, batch, records):
            return [True]

    life, flt = export_filter(Short)
    life().init("")
    with pytest.raises(W.Err) as excinfo:
        flt().filter(_WitBatch([_WitRecord(0), _WitRecord(1)]))
    assert wit_error(excinfo) == ("failed", "filter answered 1 flags for 2 records")


class Upper(Transform):
    NAME = "upper"
    VERSION = "0.1.0"

    def transform(self, batch, record):
        if record.is_tombstone():
            return drop()
        if record.value == b"same":
            return keep()
        text = record.value_str()
        if text is None:
            return reject("value is not UTF-8")
        if text == "wrong":
            return True
        return replace(record.to_output(value=text.upper(), topic=batch.target_topic + "-up"))


def test_transform_export():
    life, tr = export_transform(Upper)
    life().init("")
    out = tr().transform(
        _WitBatch(
            [
                _WitRecord(0, b"k", b"abc", [("h", b"1")]),
                _WitRecord(1, b"k", None),
                _WitRecord(2, None, b"same"),
                _WitRecord(3, None, b"\xff"),
            ]
        )
    )
    assert out == [
        T.Outcome_Replace(
            [T.OutputRecord("A.t-up", None, None, b"k", b"ABC", [T.Header("h", b"1")])]
        ),
        T.Outcome_Drop(),
        T.Outcome_Keep(),
        T.Outcome_Reject("value is not UTF-8"),
    ]
    with pytest.raises(W.Err) as excinfo:
        tr().transform(_WitBatch([_WitRecord(0, None, b"wrong")]))
    case, message = wit_error(excinfo)
    assert case == "failed"
    assert message.startswith("TypeError: transform returned bool, expected an Outcome")


# --- the example policies' table ----------------------------------------------------------------


def load_example(name):
    path = REPO / "examples/plugins/python" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES = json.loads((REPO / "examples/plugins/policy-cases.json").read_text())


def test_example_policy_answers_the_shared_table():
    example = load_example("policy")
    assert example.Lifecycle().info() == T.PluginInfo(name="example-policy-python", version="0.1.0")
    example.Lifecycle().init(CASES["config_toml"])
    p = example.ReplicationPolicy()
    topics = [case["topic"] for case in CASES["topics"]]
    assert p.format_remote_topics(CASES["source_cluster"], topics) == [c["remote"] for c in CASES["topics"]]
    assert p.topic_sources(topics) == [c["source"] for c in CASES["topics"]]
    assert p.upstream_topics(topics) == [c["upstream"] for c in CASES["topics"]]
    assert p.is_internal_topics(topics) == [c["internal"] for c in CASES["topics"]]
    assert p.heartbeats_topic() == CASES["heartbeats_topic"]
    for alias, name in CASES["offset_syncs_topics"].items():
        assert p.offset_syncs_topic(alias) == name
    for alias, name in CASES["checkpoints_topics"].items():
        assert p.checkpoints_topic(alias) == name

    sep = CASES["with_separator"]
    example.Lifecycle().init(sep["config_toml"])
    assert p.format_remote_topics("a", list(sep["remote"])) == list(sep["remote"].values())
    assert p.topic_sources(list(sep["source"])) == list(sep["source"].values())
    assert p.offset_syncs_topic("b") == sep["offset_syncs_topic"]
    assert p.checkpoints_topic("b") == sep["checkpoints_topic"]

    for case in CASES["invalid_configs"]:
        with pytest.raises(W.Err) as excinfo:
            example.Lifecycle().init(case["config_toml"])
        assert wit_error(excinfo) == ("invalid-config", case["error"]), case


def test_example_filter_keeps_its_behaviour():
    example = load_example("filter")
    assert example.Lifecycle().info() == T.PluginInfo(name="example-filter-python", version="0.1.0")
    example.Lifecycle().init("")
    batch = _WitBatch(
        [
            _WitRecord(0, headers=[("env", b"test")]),
            _WitRecord(1, headers=[("env", b"prod")]),
            _WitRecord(2, headers=[("env", None)]),
            _WitRecord(3, headers=[("env", b"prod"), ("env", b"test")]),
            _WitRecord(4),
        ]
    )
    assert example.RecordFilter().filter(batch) == [False, True, True, False, True]
    example.Lifecycle().init('header = "stage"\nequals = "dev"')
    assert example.RecordFilter().filter(
        _WitBatch([_WitRecord(0, headers=[("stage", b"dev")]), _WitRecord(1, headers=[("env", b"test")])])
    ) == [False, True]
    for text, message in [
        ("x = 1", "x: unknown key"),
        ("header = 1", "header: expected a string"),
        ('header = ""', "header: must not be empty"),
        ("equals = ", "TOML parse error at line 1"),
    ]:
        with pytest.raises(W.Err) as excinfo:
            example.Lifecycle().init(text)
        case, got = wit_error(excinfo)
        assert case == "invalid-config" and got.startswith(message), got

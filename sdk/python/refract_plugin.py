"""Guest helpers for refract plugins written in Python and built with componentize-py.

The Python counterpart of the Rust guest SDK (``plugins/sdk``): subclass a base class, override the
methods that differ, and name the class in an ``export_*`` function at module level of the app::

    from refract_plugin import DefaultReplicationPolicy, export_policy

    class SameName(DefaultReplicationPolicy):
        def format_remote_topic(self, source_cluster, topic):
            return topic

    Lifecycle, ReplicationPolicy = export_policy(SameName)

Build with ``componentize-py -d <repo>/wit -w policy-plugin componentize app -p . -p
<repo>/sdk/python -o policy.wasm``. The export functions return the classes componentize-py
looks for (``Lifecycle`` plus ``ReplicationPolicy``, ``RecordFilter`` or ``RecordTransform``);
they run the batched WIT calls one topic or record at a time through an instance of the class.

- ``init`` builds the instance with ``cls()``, parses the config (TOML text) into a ``Config``,
  calls ``instance.configure(config)`` and then rejects every key nobody read.
- An exception raised by user code in any export becomes the WIT error
  ``failed("<ExceptionType>: <message>")``, with the traceback written to stderr; raise
  ``ConfigError``, ``Unsupported`` or ``Failed`` for ``invalid-config``, ``unsupported`` or
  ``failed`` with exactly your text. ``heartbeats_topic``, ``offset_syncs_topic`` and
  ``checkpoints_topic`` have no error channel in the WIT: an exception there is logged and traps.
- Calls made before a successful ``init`` fail with ``failed("init was not called")``.
- ``info`` reports the class attributes ``NAME`` and ``VERSION``; without them the class name in
  kebab case (``SameName`` -> ``same-name``) and ``0.0.0``.

The generated ``wit_world`` bindings are imported only when the component calls in; outside a
component (natively, e.g. in unit tests) the module uses stand-ins with the same type names and
fields, and ``log`` writes to stderr, so plugin classes and even the exported classes can be
tested with plain ``python3 -m pytest``.
"""

from __future__ import annotations

import re
import sys
import tomllib

__all__ = [
    "DEFAULT_SEPARATOR",
    "HEARTBEATS_TOPIC",
    "SEPARATOR_KEY",
    "INTERNAL_TOPIC_SEPARATOR_ENABLED_KEY",
    "NOT_INITIALIZED",
    "PluginError",
    "ConfigError",
    "Unsupported",
    "Failed",
    "Config",
    "Policy",
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "Filter",
    "Transform",
    "BatchInfo",
    "Header",
    "Record",
    "OutputRecord",
    "Outcome",
    "keep",
    "drop",
    "replace",
    "reject",
    "log",
    "trace",
    "debug",
    "info",
    "warn",
    "error",
    "export_policy",
    "export_filter",
    "export_transform",
]

DEFAULT_SEPARATOR = "."
"""The separator MirrorMaker 2 uses when none is configured."""
HEARTBEATS_TOPIC = "heartbeats"
"""The name of MirrorMaker 2's heartbeats topic."""
SEPARATOR_KEY = "separator"
"""Config key of the separator."""
INTERNAL_TOPIC_SEPARATOR_ENABLED_KEY = "internal_topic_separator_enabled"
"""Config key of the switch that applies the separator to internal topic names."""
NOT_INITIALIZED = "init was not called"
"""The message of every call made before a successful ``init``."""


# --- errors -------------------------------------------------------------------------------------


class PluginError(Exception):
    """An error returned to the host as the WIT ``plugin-error`` case named by ``kind``."""

    kind = "failed"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ConfigError(PluginError):
    """``invalid-config``: the config is unusable; the text says which key and why."""

    kind = "invalid-config"


class Unsupported(PluginError):
    """``unsupported``: the plugin does not support what was asked of it."""

    kind = "unsupported"


class Failed(PluginError):
    """``failed``: anything else, with exactly this text."""

    kind = "failed"


def _describe(exc: BaseException) -> str:
    """``<ExceptionType>: <message>`` (just the type when the message is empty)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- config -------------------------------------------------------------------------------------


def _toml_type(value) -> str:
    """The TOML type name of a parsed value, as the Rust ``toml`` crate spells it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "table"
    return "datetime"


class Config:
    """A TOML table being read key by key; ``finish()`` rejects the keys nobody read.

    Every error is a ``ConfigError`` (``invalid-config``) with text ``<key path>: <reason>``,
    where the key path locates the key in the document, e.g. ``separator`` or ``rules[2].match``
    (array entries count from 1). The texts are those of the Rust SDK's ``ConfigTable``.
    A getter returns ``default`` when the key is absent; reading a key marks it as known.
    """

    def __init__(self, table: dict | None = None, path: str = ""):
        self.path = path
        self._table = dict(table or {})
        self._read: list[str] = []

    @classmethod
    def parse(cls, text: str) -> Config:
        """Parses TOML text; empty or blank text is an empty table."""
        try:
            return cls(tomllib.loads(text))
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            at = re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", message, re.S)
            end = re.fullmatch(r"(.*) \(at end of document\)", message, re.S)
            if at:
                reason, line, column = at.groups()
            elif end:
                reason, line = end.group(1), text.count("\n") + 1
                column = len(text) - (text.rfind("\n") + 1) + 1
            else:
                reason = None
            if reason is None:
                message = f"TOML parse error: {message}"
            else:
                message = f"TOML parse error at line {line}, column {column}: {reason}"
            raise ConfigError(message) from None

    def key_path(self, key: str) -> str:
        """The full path of ``key`` in this table, as used in error texts."""
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, reason: str) -> ConfigError:
        """A ``ConfigError`` about ``key`` of this table (to raise)."""
        return ConfigError(f"{self.key_path(key)}: {reason}")

    def take(self, key: str, default=None):
        """Removes and returns the raw value of ``key``, marking the key as known."""
        self._read.append(key)
        return self._table.pop(key, default)

    def _typed(self, key, default, expected, check):
        value = self.take(key, _ABSENT)
        if value is _ABSENT:
            return default
        if not check(value):
            raise self.error(key, f"expected {expected}, found {_toml_type(value)}")
        return value

    def string(self, key: str, default: str | None = None) -> str | None:
        """An optional string."""
        return self._typed(key, default, "a string", lambda v: isinstance(v, str))

    def required_string(self, key: str) -> str:
        """A string that must be present."""
        value = self.string(key)
        if value is None:
            raise self.error(key, "missing")
        return value

    def bool(self, key: str, default=None):
        """An optional boolean."""
        return self._typed(key, default, "a boolean", lambda v: v is True or v is False)

    def int(self, key: str, default=None):
        """An optional integer."""
        return self._typed(
            key, default, "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
        )

    def float(self, key: str, default=None):
        """An optional number: a float, or an integer converted to float."""
        def check(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        value = self._typed(key, default, "a number", check)
        return value if value is default else float(value)

    def list(self, key: str, default=None):
        """An optional array, as a list of raw values."""
        return self._typed(key, default, "an array", lambda v: isinstance(v, list))

    def strings(self, key: str, default=None):
        """An optional array of strings."""
        entries = self._typed(key, _ABSENT, "an array of strings", lambda v: isinstance(v, list))
        if entries is _ABSENT:
            return default
        base = self.key_path(key)
        for index, entry in enumerate(entries, 1):
            if not isinstance(entry, str):
                raise ConfigError(f"{base}[{index}]: expected a string, found {_toml_type(entry)}")
        return entries

    def table(self, key: str) -> Config | None:
        """An optional nested table, as a ``Config``; ``finish()`` it to reject its unknown
        keys."""
        value = self._typed(key, _ABSENT, "a table", lambda v: isinstance(v, dict))
        return None if value is _ABSENT else Config(value, self.key_path(key))

    def tables(self, key: str):
        """An optional array of tables (``[[key]]`` sections or inline tables), as ``Config``s."""
        entries = self._typed(key, _ABSENT, "an array of tables", lambda v: isinstance(v, list))
        if entries is _ABSENT:
            return None
        base = self.key_path(key)
        out = []
        for index, entry in enumerate(entries, 1):
            path = f"{base}[{index}]"
            if not isinstance(entry, dict):
                raise ConfigError(f"{path}: expected a table, found {_toml_type(entry)}")
            out.append(Config(entry, path))
        return out

    def string_table(self, key: str, default=None):
        """An optional table whose values are all strings, as a dict in key order."""
        nested = self.table(key)
        if nested is None:
            return default
        out = {}
        for name in sorted(nested._table):
            value = nested._table[name]
            if not isinstance(value, str):
                raise nested.error(name, f"expected a string, found {_toml_type(value)}")
            out[name] = value
        return out

    def finish(self) -> None:
        """Raises a ``ConfigError`` naming the first (in key order) key present but never read."""
        if not self._table:
            return
        unknown = min(self._table)
        known = sorted(set(self._read))
        if known:
            raise self.error(unknown, "unknown key; expected one of: " + ", ".join(known))
        raise self.error(unknown, "unknown key; no keys are accepted here")


_ABSENT = object()


# --- replication policies (MirrorMaker 2) -------------------------------------------------------


def _topic_source(topic: str, separator: str):
    """``topicSource``: the first token of Java's ``topic.split(Pattern.quote(separator))``, if
    there are at least two tokens once trailing empty tokens are dropped."""
    tokens = topic.split(separator)
    return tokens[0] if any(tokens[1:]) else None


def _upstream_topic(topic: str, separator: str):
    """``upstreamTopic``: what follows the source alias and the separator."""
    source = _topic_source(topic, separator)
    return None if source is None else topic[len(source) + len(separator) :]


def _is_mm2_internal_topic(topic: str, internal_separator: str) -> bool:
    """``isMM2InternalTopic``: ends with the internal separator followed by ``internal``."""
    return topic.endswith("internal") and topic[: -len("internal")].endswith(internal_separator)


def _is_internal_topic(topic: str, internal_separator: str) -> bool:
    """``isInternalTopic``: MirrorMaker 2 internal, Kafka internal (``__``, ``.``) or Connect
    internal (``-internal``, ``.internal``)."""
    return (
        _is_mm2_internal_topic(topic, internal_separator)
        or topic.startswith("__")
        or topic.startswith(".")
        or topic.endswith("-internal")
        or topic.endswith(".internal")
    )


def _offset_syncs_topic(cluster_alias: str, i: str) -> str:
    return f"mm2-offset-syncs{i}{cluster_alias}{i}internal"


def _checkpoints_topic(cluster_alias: str, i: str) -> str:
    return f"{cluster_alias}{i}checkpoints{i}internal"


class _Plugin:
    NAME: str | None = None
    """The name ``info`` reports; default: the class name in kebab case."""
    VERSION: str | None = None
    """The version ``info`` reports; default: ``0.0.0``."""

    def configure(self, config: Config) -> None:
        """Reads this plugin's keys from ``config``; keys nobody read are rejected afterwards.

        Override it to read your own keys, and call ``super().configure(config)`` to keep the
        base class's keys."""


class Policy(_Plugin):
    """A replication policy answered one topic at a time (MirrorMaker 2's ``ReplicationPolicy``).

    Subclasses implement ``format_remote_topic``, ``topic_source`` and ``upstream_topic``; the
    other answers follow the defaults of MirrorMaker 2's interface (``.`` in internal topic
    names). Every answer must be a pure function of the config and the arguments: the host caches
    answers per topic."""

    def format_remote_topic(self, source_cluster: str, topic: str) -> str:
        """The name ``topic`` from cluster ``source_cluster`` gets on the target."""
        raise NotImplementedError(f"{type(self).__name__}.format_remote_topic")

    def topic_source(self, topic: str) -> str | None:
        """The cluster a topic was replicated from, None for a local topic."""
        raise NotImplementedError(f"{type(self).__name__}.topic_source")

    def upstream_topic(self, topic: str) -> str | None:
        """The topic's name one hop upstream, None for a local topic."""
        raise NotImplementedError(f"{type(self).__name__}.upstream_topic")

    def is_internal_topic(self, topic: str) -> bool:
        """Whether a topic is internal and never mirrored."""
        return _is_internal_topic(topic, DEFAULT_SEPARATOR)

    def heartbeats_topic(self) -> str:
        """The name of the heartbeats topic."""
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """The offset-syncs topic for a cluster alias."""
        return _offset_syncs_topic(cluster_alias, DEFAULT_SEPARATOR)

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """The checkpoints topic for a cluster alias."""
        return _checkpoints_topic(cluster_alias, DEFAULT_SEPARATOR)


class DefaultReplicationPolicy(Policy):
    """MirrorMaker 2's ``DefaultReplicationPolicy``: remote topics are ``<source><sep><topic>``.

    Config keys: ``separator`` (string, default ``"."``, not empty) and
    ``internal_topic_separator_enabled`` (bool, default true: internal topic names use the
    separator too; false: they use ``"."``)."""

    def __init__(self, separator: str = DEFAULT_SEPARATOR, internal_topic_separator_enabled=True):
        if separator == "":
            raise ConfigError(f"{SEPARATOR_KEY}: must not be empty")
        self.separator = separator
        self.internal_topic_separator_enabled = internal_topic_separator_enabled

    def configure(self, config: Config) -> None:
        """Reads ``separator`` and ``internal_topic_separator_enabled``."""
        super().configure(config)
        separator = config.string(SEPARATOR_KEY, DEFAULT_SEPARATOR)
        enabled = config.bool(INTERNAL_TOPIC_SEPARATOR_ENABLED_KEY, True)
        if separator == "":
            raise config.error(SEPARATOR_KEY, "must not be empty")
        if separator != DEFAULT_SEPARATOR:
            info(f"using custom remote topic separator `{separator}`")
            if not enabled:
                warn(
                    f"internal topic names use `{DEFAULT_SEPARATOR}` instead of the separator "
                    f"`{separator}`"
                )
        self.separator = separator
        self.internal_topic_separator_enabled = enabled

    @property
    def internal_separator(self) -> str:
        """The separator used in internal topic names."""
        return self.separator if self.internal_topic_separator_enabled else DEFAULT_SEPARATOR

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """Whether ``topic`` is one of MirrorMaker 2's own internal topics."""
        return _is_mm2_internal_topic(topic, self.internal_separator)

    def is_checkpoints_topic(self, topic: str) -> bool:
        """Whether ``topic`` is a checkpoints topic."""
        i = self.internal_separator
        return topic.endswith(f"{i}checkpoints{i}internal")

    def format_remote_topic(self, source_cluster: str, topic: str) -> str:
        return f"{source_cluster}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        return _topic_source(topic, self.separator)

    def upstream_topic(self, topic: str) -> str | None:
        return _upstream_topic(topic, self.separator)

    def is_internal_topic(self, topic: str) -> bool:
        return _is_internal_topic(topic, self.internal_separator)

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return _offset_syncs_topic(cluster_alias, self.internal_separator)

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return _checkpoints_topic(cluster_alias, self.internal_separator)


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """MirrorMaker 2's ``IdentityReplicationPolicy``: remote topics keep their names, except
    heartbeat-like topics (names ending in ``heartbeats``), which follow the default policy, as do
    internal topic names. ``topic_source`` and ``upstream_topic`` are None for other topics.
    Same config keys as ``DefaultReplicationPolicy``."""

    def looks_like_heartbeat(self, topic: str) -> bool:
        """Whether ``topic`` ends with the heartbeats topic's name."""
        return topic.endswith(HEARTBEATS_TOPIC)

    def format_remote_topic(self, source_cluster: str, topic: str) -> str:
        if self.looks_like_heartbeat(topic):
            return super().format_remote_topic(source_cluster, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        return super().topic_source(topic) if self.looks_like_heartbeat(topic) else None

    def upstream_topic(self, topic: str) -> str | None:
        return super().upstream_topic(topic) if self.looks_like_heartbeat(topic) else None


# --- records, filters and transforms ------------------------------------------------------------


def _bytes(value):
    """None, bytes, or text encoded as UTF-8."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"expected bytes, str or None, found {type(value).__name__}")


def _text(value):
    if value is None:
        return None
    try:
        return value.decode()
    except UnicodeDecodeError:
        return None


class BatchInfo:
    """What a batch says about all of its records."""

    __slots__ = ("source_cluster", "topic", "target_topic")

    def __init__(self, source_cluster: str, topic: str, target_topic: str):
        self.source_cluster = source_cluster
        """Alias of the cluster the records were read from."""
        self.topic = topic
        """The topic they were read from."""
        self.target_topic = target_topic
        """The topic the replication policy named for them on the target."""

    def __repr__(self):
        return f"BatchInfo({self.source_cluster!r}, {self.topic!r}, {self.target_topic!r})"


class Header:
    """One record header; ``value`` is bytes or None (null). Text values are encoded as UTF-8."""

    __slots__ = ("key", "value")

    def __init__(self, key: str, value=None):
        self.key = key
        self.value = _bytes(value)

    def value_str(self) -> str | None:
        """The value as UTF-8 text; None when it is null or not UTF-8."""
        return _text(self.value)

    def __eq__(self, other):
        return isinstance(other, Header) and (self.key, self.value) == (other.key, other.value)

    def __repr__(self):
        return f"Header({self.key!r}, {self.value!r})"


class Record:
    """A record as read from a source topic-partition (the WIT ``kafka-record``)."""

    __slots__ = ("partition", "offset", "timestamp_ms", "key", "value", "headers")

    def __init__(self, partition=0, offset=0, timestamp_ms=0, key=None, value=None, headers=()):
        self.partition = partition
        self.offset = offset
        self.timestamp_ms = timestamp_ms
        self.key = _bytes(key)
        self.value = _bytes(value)
        self.headers = [h if isinstance(h, Header) else Header(*h) for h in headers]

    def header_entry(self, name: str) -> Header | None:
        """The last header named ``name`` (Kafka's ``lastHeader``), whatever its value."""
        for header in reversed(self.headers):
            if header.key == name:
                return header
        return None

    def header(self, name: str) -> bytes | None:
        """The value of the last header named ``name``; None when absent or null."""
        entry = self.header_entry(name)
        return None if entry is None else entry.value

    def header_str(self, name: str) -> str | None:
        """The value of the last header named ``name`` as UTF-8; None when absent, null or not
        UTF-8."""
        return _text(self.header(name))

    def has_header(self, name: str) -> bool:
        """Whether the record has at least one header named ``name`` (null values count)."""
        return any(header.key == name for header in self.headers)

    def headers_named(self, name: str) -> list[Header]:
        """Every header named ``name``, in record order."""
        return [header for header in self.headers if header.key == name]

    def key_str(self) -> str | None:
        """The key as UTF-8; None when it is null or not UTF-8."""
        return _text(self.key)

    def value_str(self) -> str | None:
        """The value as UTF-8; None when it is null or not UTF-8."""
        return _text(self.value)

    def is_tombstone(self) -> bool:
        """Whether the value is null."""
        return self.value is None

    def to_output(self, **changes) -> OutputRecord:
        """A copy of this record as an output record for the batch's target topic with the
        input's partition and timestamp; keyword arguments (``topic``, ``partition``,
        ``timestamp_ms``, ``key``, ``value``, ``headers``) change those fields."""
        fields = {"key": self.key, "value": self.value, "headers": list(self.headers)}
        fields.update(changes)
        return OutputRecord(**fields)

    def __repr__(self):
        return (
            f"Record(partition={self.partition}, offset={self.offset}, "
            f"timestamp_ms={self.timestamp_ms}, key={self.key!r}, value={self.value!r}, "
            f"headers={self.headers!r})"
        )


class OutputRecord:
    """A record a transform emits. ``topic`` None = the batch's target topic; ``partition`` None =
    the input's partition; ``timestamp_ms`` None = the input's timestamp. Key, value and header
    values are bytes or None (null); text is encoded as UTF-8."""

    __slots__ = ("topic", "partition", "timestamp_ms", "key", "value", "headers")

    def __init__(
        self, key=None, value=None, headers=(), *, topic=None, partition=None, timestamp_ms=None
    ):
        self.topic = topic
        self.partition = partition
        self.timestamp_ms = timestamp_ms
        self.key = _bytes(key)
        self.value = _bytes(value)
        self.headers = [h if isinstance(h, Header) else Header(*h) for h in headers]

    def with_header(self, key: str, value) -> OutputRecord:
        """Appends a header; returns this record."""
        self.headers.append(Header(key, value))
        return self

    def without_header(self, name: str) -> OutputRecord:
        """Removes every header named ``name``; returns this record."""
        self.headers = [header for header in self.headers if header.key != name]
        return self

    def _fields(self):
        return (self.topic, self.partition, self.timestamp_ms, self.key, self.value, self.headers)

    def __eq__(self, other):
        return isinstance(other, OutputRecord) and self._fields() == other._fields()

    def __repr__(self):
        return (
            f"OutputRecord(key={self.key!r}, value={self.value!r}, headers={self.headers!r}, "
            f"topic={self.topic!r}, partition={self.partition!r}, "
            f"timestamp_ms={self.timestamp_ms!r})"
        )


class Outcome:
    """What a transform decides for one record; build it with ``keep()``, ``drop()``,
    ``replace(...)`` or ``reject(reason)``. ``kind`` is ``keep``, ``drop``, ``replace`` or
    ``reject``."""

    __slots__ = ("kind", "records", "reason")

    def __init__(self, kind: str, records=(), reason: str = ""):
        self.kind = kind
        self.records = list(records)
        self.reason = reason

    def __eq__(self, other):
        return isinstance(other, Outcome) and (self.kind, self.records, self.reason) == (
            other.kind,
            other.records,
            other.reason,
        )

    def __repr__(self):
        if self.kind == "replace":
            return f"replace({', '.join(map(repr, self.records))})"
        if self.kind == "reject":
            return f"reject({self.reason!r})"
        return f"{self.kind}()"


_KEEP = Outcome("keep")
_DROP = Outcome("drop")


def keep() -> Outcome:
    """Forward the record unchanged (costs nothing to send back)."""
    return _KEEP


def drop() -> Outcome:
    """Do not forward the record."""
    return _DROP


def replace(*records) -> Outcome:
    """Forward these output records instead: zero or more (lists are flattened)."""
    flat = []
    for item in records:
        flat.extend(item if isinstance(item, (list, tuple)) else [item])
    for item in flat:
        if not isinstance(item, OutputRecord):
            raise TypeError(f"replace() takes OutputRecord values, found {type(item).__name__}")
    return Outcome("replace", flat)


def reject(reason: str) -> Outcome:
    """This record cannot be processed; the host applies the processor's ``on_error``."""
    return Outcome("reject", reason=str(reason))


class Filter(_Plugin):
    """Decides per record whether it is mirrored: implement ``keep``."""

    def keep(self, batch: BatchInfo, record: Record) -> bool:
        """Whether ``record`` of ``batch`` is mirrored."""
        raise NotImplementedError(f"{type(self).__name__}.keep")

    def filter_batch(self, batch: BatchInfo, records: list) -> list:
        """One flag per record, in order; by default from ``keep``. Override to decide a whole
        batch at once."""
        return [self.keep(batch, record) for record in records]


class Transform(_Plugin):
    """Rewrites, drops, fans out or re-routes records: implement ``transform``."""

    def transform(self, batch: BatchInfo, record: Record) -> Outcome:
        """What happens to ``record`` of ``batch``: ``keep()``, ``drop()``, ``replace(...)`` or
        ``reject(reason)``."""
        raise NotImplementedError(f"{type(self).__name__}.transform")

    def transform_batch(self, batch: BatchInfo, records: list) -> list:
        """One outcome per record, in order; by default from ``transform``."""
        return [self.transform(batch, record) for record in records]


# --- bindings, logging --------------------------------------------------------------------------


class _Bindings:
    """What the glue needs from componentize-py's generated modules."""

    def __init__(self, types, host, err):
        self.types = types
        self.host = host
        self.Err = err


def _native_bindings() -> _Bindings:
    """Stand-ins for the generated bindings outside a component (native tests): the same type
    names and fields; ``log`` writes to stderr."""
    from dataclasses import dataclass, field
    from enum import Enum

    class types:
        @dataclass
        class PluginInfo:
            name: str
            version: str

        @dataclass
        class PluginError_InvalidConfig:
            value: str

        @dataclass
        class PluginError_Unsupported:
            value: str

        @dataclass
        class PluginError_Failed:
            value: str

        @dataclass
        class Header:
            key: str
            value: bytes | None

        @dataclass
        class OutputRecord:
            topic: str | None
            partition: int | None
            timestamp_ms: int | None
            key: bytes | None
            value: bytes | None
            headers: list = field(default_factory=list)

        @dataclass
        class Outcome_Keep:
            pass

        @dataclass
        class Outcome_Drop:
            pass

        @dataclass
        class Outcome_Replace:
            value: list

        @dataclass
        class Outcome_Reject:
            value: str

        class LogLevel(Enum):
            TRACE = 0
            DEBUG = 1
            INFO = 2
            WARN = 3
            ERROR = 4

    class host:
        @staticmethod
        def log(level, message):
            print(f"[{level.name.lower()}] {message}", file=sys.stderr)

    class Err(Exception):
        """Stands for componentize-py's ``Err``: ``value`` is the WIT error."""

        def __init__(self, value):
            super().__init__(value)
            self.value = value

    return _Bindings(types, host, Err)


_bindings_cache = []


def _bindings() -> _Bindings:
    """The generated bindings, or native stand-ins outside a component.

    Called by the ``export_*`` functions, so that the generated modules are imported while
    componentize-py runs the app at build time: a component holds only the modules imported
    then, and an import at call time fails."""
    if not _bindings_cache:
        try:
            from componentize_py_types import Err
            from wit_world.imports import host, types
        except ImportError:
            if sys.platform == "wasi":
                raise
            _bindings_cache.append(_native_bindings())
        else:
            _bindings_cache.append(_Bindings(types, host, Err))
    return _bindings_cache[0]


_LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level: str, message: str) -> None:
    """Writes ``message`` to the host's log at ``level`` (``trace``, ``debug``, ``info``,
    ``warn``, ``error``); outside a component it goes to stderr."""
    if level not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}; expected one of: {', '.join(_LEVELS)}")
    b = _bindings()
    b.host.log(getattr(b.types.LogLevel, level.upper()), str(message))


def trace(message: str) -> None:
    log("trace", message)


def debug(message: str) -> None:
    log("debug", message)


def info(message: str) -> None:
    log("info", message)


def warn(message: str) -> None:
    log("warn", message)


def error(message: str) -> None:
    log("error", message)


# --- the glue behind export_* -------------------------------------------------------------------


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name).lower()


class _Slot:
    """The plugin class, and the instance a successful ``init`` built from it."""

    def __init__(self, cls, required):
        if not isinstance(cls, type):
            raise TypeError(f"expected a class, found {type(cls).__name__}")
        missing = [name for name in required if not callable(getattr(cls, name, None))]
        if missing:
            raise TypeError(f"{cls.__name__} lacks {', '.join(missing)}")
        self.cls = cls
        self.instance = None
        _bindings()

    def info(self):
        name = getattr(self.cls, "NAME", None) or _kebab(self.cls.__name__)
        version = getattr(self.cls, "VERSION", None) or "0.0.0"
        return _bindings().types.PluginInfo(name=name, version=version)

    def init(self, text: str) -> None:
        try:
            plugin = self.cls()
            config = Config.parse(text)
            configure = getattr(plugin, "configure", None)
            if configure is not None:
                configure(config)
            config.finish()
        except Exception as exc:
            raise _wit_error(exc) from None
        self.instance = plugin

    def call(self, body):
        """Runs ``body(instance)``; every exception becomes a WIT error."""
        if self.instance is None:
            raise _wit_error(Failed(NOT_INITIALIZED))
        try:
            return body(self.instance)
        except Exception as exc:
            raise _wit_error(exc) from None

    def call_or_trap(self, function, body):
        """Runs ``body(instance)`` for a function without an error channel: logs and re-raises."""
        if self.instance is None:
            error(f"{function}: {NOT_INITIALIZED}")
            raise RuntimeError(f"{function}: {NOT_INITIALIZED}")
        try:
            answer = body(self.instance)
            if not isinstance(answer, str):
                raise TypeError(f"{function} returned {type(answer).__name__}, expected str")
            return answer
        except Exception as exc:
            _report(exc)
            error(f"{function}: {_describe(exc)}")
            raise


def _format_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` as Python prints it, without source lines (a component has no
    source files to show, and the ``traceback`` module would add about 0.8 MB to it)."""
    seen = set()

    def chain(exc):
        seen.add(id(exc))
        cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        lines = []
        if cause is not None and id(cause) not in seen:
            lines = chain(cause)
            lines.append(
                "\nThe above exception was the direct cause of the following exception:\n\n"
                if exc.__cause__ is not None
                else "\nDuring handling of the above exception, another exception occurred:\n\n"
            )
        lines.append("Traceback (most recent call last):\n")
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            lines.append(f'  File "{code.co_filename}", line {tb.tb_lineno}, in {code.co_name}\n')
            tb = tb.tb_next
        lines.append(_describe(exc) + "\n")
        return lines

    return "".join(chain(exc))


def _report(exc: BaseException) -> None:
    """Writes the traceback of ``exc`` to stderr, and to the host's log at debug level (the host
    shows a plugin's stderr only when a call traps)."""
    text = _format_traceback(exc)
    sys.stderr.write(text)
    try:
        debug(text.rstrip("\n"))
    except Exception:
        pass


def _wit_error(exc: BaseException):
    """The ``Err(plugin-error)`` to raise for ``exc``."""
    b = _bindings()
    if isinstance(exc, b.Err):
        return exc
    if isinstance(exc, PluginError):
        kind, message = exc.kind, exc.message
    else:
        _report(exc)
        kind, message = "failed", _describe(exc)
    case = {
        "invalid-config": b.types.PluginError_InvalidConfig,
        "unsupported": b.types.PluginError_Unsupported,
    }.get(kind, b.types.PluginError_Failed)
    return b.Err(case(str(message)))


def _optional_str(function, topic, answer):
    if answer is None or isinstance(answer, str):
        return answer
    raise TypeError(f"{function}({topic!r}) returned {type(answer).__name__}, expected str or None")


def _str(function, topic, answer):
    if isinstance(answer, str):
        return answer
    raise TypeError(f"{function}({topic!r}) returned {type(answer).__name__}, expected str")


def _check_count(function, what, got, expected):
    if got != expected:
        raise Failed(f"{function} answered {got} {what} for {expected} records")


_POLICY_METHODS = (
    "format_remote_topic",
    "topic_source",
    "upstream_topic",
    "is_internal_topic",
    "heartbeats_topic",
    "offset_syncs_topic",
    "checkpoints_topic",
)


def _lifecycle_class(slot):
    class Lifecycle:
        def info(self):
            return slot.info()

        def init(self, config: str) -> None:
            slot.init(config)

    return Lifecycle


def export_policy(cls):
    """``(Lifecycle, ReplicationPolicy)``: the export classes of the ``policy-plugin`` world,
    answering through an instance of ``cls`` (usually a ``Policy`` subclass). Assign them at
    module level: ``Lifecycle, ReplicationPolicy = export_policy(MyPolicy)``."""
    slot = _Slot(cls, _POLICY_METHODS)

    class ReplicationPolicy:
        def format_remote_topics(self, source_cluster, topics):
            return slot.call(
                lambda p: [
                    _str("format_remote_topic", t, p.format_remote_topic(source_cluster, t))
                    for t in topics
                ]
            )

        def topic_sources(self, topics):
            return slot.call(
                lambda p: [_optional_str("topic_source", t, p.topic_source(t)) for t in topics]
            )

        def upstream_topics(self, topics):
            return slot.call(
                lambda p: [_optional_str("upstream_topic", t, p.upstream_topic(t)) for t in topics]
            )

        def is_internal_topics(self, topics):
            return slot.call(lambda p: [bool(p.is_internal_topic(t)) for t in topics])

        def heartbeats_topic(self):
            return slot.call_or_trap("heartbeats_topic", lambda p: p.heartbeats_topic())

        def offset_syncs_topic(self, cluster_alias):
            return slot.call_or_trap(
                "offset_syncs_topic", lambda p: p.offset_syncs_topic(cluster_alias)
            )

        def checkpoints_topic(self, cluster_alias):
            return slot.call_or_trap(
                "checkpoints_topic", lambda p: p.checkpoints_topic(cluster_alias)
            )

    return _lifecycle_class(slot), ReplicationPolicy


def _split(batch):
    info = BatchInfo(batch.source_cluster, batch.topic, batch.target_topic)
    records = [
        r
        if isinstance(r, Record)
        else Record(
            r.partition,
            r.offset,
            r.timestamp_ms,
            r.key,
            r.value,
            [Header(h.key, h.value) for h in r.headers],
        )
        for r in batch.records
    ]
    return info, records


def export_filter(cls):
    """``(Lifecycle, RecordFilter)``: the export classes of the ``filter-plugin`` world, answering
    through an instance of ``cls`` (usually a ``Filter`` subclass). Assign them at module level:
    ``Lifecycle, RecordFilter = export_filter(MyFilter)``."""
    slot = _Slot(cls, ("filter_batch",))

    def run(plugin, batch):
        info, records = _split(batch)
        flags = [bool(flag) for flag in plugin.filter_batch(info, records)]
        _check_count("filter", "flags", len(flags), len(records))
        return flags

    class RecordFilter:
        def filter(self, batch):
            return slot.call(lambda p: run(p, batch))

    return _lifecycle_class(slot), RecordFilter


def _wit_outcome(outcome, t):
    if not isinstance(outcome, Outcome):
        raise TypeError(
            f"transform returned {type(outcome).__name__}, expected an Outcome: keep(), drop(), "
            "replace(...) or reject(reason)"
        )
    if outcome.kind == "keep":
        return t.Outcome_Keep()
    if outcome.kind == "drop":
        return t.Outcome_Drop()
    if outcome.kind == "reject":
        return t.Outcome_Reject(outcome.reason)
    if outcome.kind != "replace":
        raise ValueError(f"unknown outcome kind {outcome.kind!r}")
    return t.Outcome_Replace(
        [
            t.OutputRecord(
                topic=r.topic,
                partition=r.partition,
                timestamp_ms=r.timestamp_ms,
                key=_bytes(r.key),
                value=_bytes(r.value),
                headers=[t.Header(key=h.key, value=_bytes(h.value)) for h in r.headers],
            )
            for r in outcome.records
        ]
    )


def export_transform(cls):
    """``(Lifecycle, RecordTransform)``: the export classes of the ``transform-plugin`` world,
    answering through an instance of ``cls`` (usually a ``Transform`` subclass). Assign them at
    module level: ``Lifecycle, RecordTransform = export_transform(MyTransform)``."""
    slot = _Slot(cls, ("transform_batch",))

    def run(plugin, batch):
        info, records = _split(batch)
        outcomes = list(plugin.transform_batch(info, records))
        _check_count("transform", "outcomes", len(outcomes), len(records))
        t = _bindings().types
        return [_wit_outcome(outcome, t) for outcome in outcomes]

    class RecordTransform:
        def transform(self, batch):
            return slot.call(lambda p: run(p, batch))

    return _lifecycle_class(slot), RecordTransform

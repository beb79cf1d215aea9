// Guest helpers for refract plugins written in JavaScript and built with componentize-js.
//
// The JavaScript counterpart of the Rust guest SDK (plugins/sdk) and of sdk/python: extend a base
// class, override the methods that differ, and export what an `export*` function returns:
//
//   import { DefaultReplicationPolicy, exportPolicy } from 'refract-plugin';
//
//   class SameName extends DefaultReplicationPolicy {
//     formatRemoteTopic(sourceCluster, topic) {
//       return topic;
//     }
//   }
//
//   export const { lifecycle, replicationPolicy } = exportPolicy(SameName);
//
// Build with `node sdk/javascript/build.mjs --world policy-plugin --source app.js --out app.wasm`,
// which bundles this module (and its TOML parser) into the plugin.
//
// - `init` builds the instance with `new cls()`, parses the config (TOML text) into a `Config`,
//   calls `instance.configure(config)` and then rejects every key nobody read.
// - An exception thrown by user code in any export becomes the WIT error
//   `failed("<Error name>: <message>")`, with the stack written to stderr (and to the host's log at
//   debug level); throw a `ConfigError`, `Unsupported` or `Failed` for `invalid-config`,
//   `unsupported` or `failed` with exactly your text. `heartbeatsTopic`, `offsetSyncsTopic` and
//   `checkpointsTopic` have no error channel in the WIT: an exception there is logged and traps.
// - Calls made before a successful `init` fail with `failed("init was not called")`.
// - `info` reports the static class fields `NAME` and `VERSION`; without them the class name in
//   kebab case (`SameName` -> `same-name`) and `0.0.0`.

import { parse as parseToml } from 'smol-toml';
import { log as hostLog } from 'refract:plugin/host@0.1.0';

/** The separator MirrorMaker 2 uses when none is configured. */
export const DEFAULT_SEPARATOR = '.';
/** The name of MirrorMaker 2's heartbeats topic. */
export const HEARTBEATS_TOPIC = 'heartbeats';
/** Config key of the separator. */
export const SEPARATOR_KEY = 'separator';
/** Config key of the switch that applies the separator to internal topic names. */
export const INTERNAL_TOPIC_SEPARATOR_ENABLED_KEY = 'internal_topic_separator_enabled';
/** The message of every call made before a successful `init`. */
export const NOT_INITIALIZED = 'init was not called';

// --- errors ---------------------------------------------------------------------------------------

/** An error returned to the host as the WIT `plugin-error` case named by `kind`. */
export class PluginError extends Error {
  constructor(message, kind = 'failed') {
    super(message);
    this.name = new.target.name;
    this.kind = kind;
  }
}

/** `invalid-config`: the config is unusable; the text says which key and why. */
export class ConfigError extends PluginError {
  constructor(message) {
    super(message, 'invalid-config');
  }
}

/** `unsupported`: the plugin does not support what was asked of it. */
export class Unsupported extends PluginError {
  constructor(message) {
    super(message, 'unsupported');
  }
}

/** `failed`: anything else, with exactly this text. */
export class Failed extends PluginError {
  constructor(message) {
    super(message, 'failed');
  }
}

/** `<Error name>: <message>` (just the name when the message is empty); other values as text. */
function describe(err) {
  if (err instanceof Error) return err.message ? `${err.name}: ${err.message}` : err.name;
  return `thrown: ${String(err)}`;
}

// --- config ---------------------------------------------------------------------------------------

/** The TOML type name of a parsed value, as the Rust `toml` crate spells it. */
function tomlType(value) {
  if (typeof value === 'string') return 'string';
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'bigint') return 'integer';
  if (typeof value === 'number') return 'float';
  if (Array.isArray(value)) return 'array';
  if (value instanceof Date) return 'datetime';
  return 'table';
}

const isTable = (v) => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
const byCodePoint = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
const own = (table, key) => Object.prototype.hasOwnProperty.call(table, key);

/** An integer as a Number; out of the safe range it is an error about `key`. */
function toNumber(config, key, value) {
  if (value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(value);
  throw config.error(key, 'integer out of the range JavaScript numbers hold exactly');
}

/**
 * A TOML table being read key by key; `finish()` rejects the keys nobody read.
 *
 * Every error is a `ConfigError` (`invalid-config`) with text `<key path>: <reason>`, where the key
 * path locates the key in the document, e.g. `separator` or `rules[2].match` (array entries count
 * from 1). The texts are those of the Rust SDK's `ConfigTable`. A getter returns `defaultValue`
 * when the key is absent; reading a key marks it as known. Integers are parsed exactly (as
 * BigInt) and handed out as Numbers.
 */
export class Config {
  constructor(table = {}, path = '') {
    this.path = path;
    this._table = new Map(Object.keys(table).map((k) => [k, table[k]]));
    this._read = [];
  }

  /** Parses TOML text; empty or blank text is an empty table. */
  static parse(text) {
    let table;
    try {
      table = parseToml(text, { integersAsBigInt: true });
    } catch (err) {
      const first = String(err?.message ?? err).split('\n')[0].replace(/^Invalid TOML document: /, '');
      const at = Number.isInteger(err?.line) ? ` at line ${err.line}, column ${err.column}` : '';
      throw new ConfigError(`TOML parse error${at}: ${first}`);
    }
    return new Config(table);
  }

  /** The full path of `key` in this table, as used in error texts. */
  keyPath(key) {
    return this.path ? `${this.path}.${key}` : key;
  }

  /** A `ConfigError` about `key` of this table (to throw). */
  error(key, reason) {
    return new ConfigError(`${this.keyPath(key)}: ${reason}`);
  }

  /** Removes and returns the raw value of `key` (undefined when absent), marking it as known. */
  take(key) {
    this._read.push(key);
    const value = this._table.get(key);
    this._table.delete(key);
    return value;
  }

  _typed(key, expected, check) {
    const value = this.take(key);
    if (value !== undefined && !check(value)) {
      throw this.error(key, `expected ${expected}, found ${tomlType(value)}`);
    }
    return value;
  }

  /** An optional string. */
  string(key, defaultValue = undefined) {
    return this._typed(key, 'a string', (v) => typeof v === 'string') ?? defaultValue;
  }

  /** A string that must be present. */
  requiredString(key) {
    const value = this.string(key);
    if (value === undefined) throw this.error(key, 'missing');
    return value;
  }

  /** An optional boolean. */
  bool(key, defaultValue = undefined) {
    return this._typed(key, 'a boolean', (v) => typeof v === 'boolean') ?? defaultValue;
  }

  /** An optional integer, as a Number. */
  int(key, defaultValue = undefined) {
    const value = this._typed(key, 'an integer', (v) => typeof v === 'bigint');
    return value === undefined ? defaultValue : toNumber(this, key, value);
  }

  /** An optional number: a float, or an integer converted to a Number. */
  float(key, defaultValue = undefined) {
    const value = this._typed(key, 'a number', (v) => typeof v === 'number' || typeof v === 'bigint');
    return value === undefined ? defaultValue : Number(value);
  }

  /** An optional array, as an array of raw values (integers as BigInt). */
  list(key, defaultValue = undefined) {
    return this._typed(key, 'an array', Array.isArray) ?? defaultValue;
  }

  /** An optional array of strings. */
  strings(key, defaultValue = undefined) {
    const entries = this._typed(key, 'an array of strings', Array.isArray);
    if (entries === undefined) return defaultValue;
    entries.forEach((entry, index) => {
      if (typeof entry !== 'string') {
        throw new ConfigError(`${this.keyPath(key)}[${index + 1}]: expected a string, found ${tomlType(entry)}`);
      }
    });
    return entries;
  }

  /** An optional nested table, as a `Config` (`finish()` it to reject its unknown keys). */
  table(key) {
    const value = this._typed(key, 'a table', isTable);
    return value === undefined ? undefined : new Config(value, this.keyPath(key));
  }

  /** An optional array of tables (`[[key]]` sections or inline tables), as `Config`s. */
  tables(key) {
    const entries = this._typed(key, 'an array of tables', Array.isArray);
    if (entries === undefined) return undefined;
    return entries.map((entry, index) => {
      const path = `${this.keyPath(key)}[${index + 1}]`;
      if (!isTable(entry)) throw new ConfigError(`${path}: expected a table, found ${tomlType(entry)}`);
      return new Config(entry, path);
    });
  }

  /** An optional table whose values are all strings, as a Map in key order. */
  stringTable(key, defaultValue = undefined) {
    const nested = this.table(key);
    if (nested === undefined) return defaultValue;
    const out = new Map();
    for (const name of [...nested._table.keys()].sort(byCodePoint)) {
      const value = nested._table.get(name);
      if (typeof value !== 'string') throw nested.error(name, `expected a string, found ${tomlType(value)}`);
      out.set(name, value);
    }
    return out;
  }

  /** Throws a `ConfigError` naming the first (in key order) key present but never read. */
  finish() {
    if (this._table.size === 0) return;
    const unknown = [...this._table.keys()].sort(byCodePoint)[0];
    const known = [...new Set(this._read)].sort(byCodePoint);
    throw this.error(
      unknown,
      known.length ? `unknown key; expected one of: ${known.join(', ')}` : 'unknown key; no keys are accepted here',
    );
  }
}

// --- replication policies (MirrorMaker 2) ---------------------------------------------------------

/**
 * `topicSource`: the first token of Java's `topic.split(Pattern.quote(separator))`, if there are at
 * least two tokens once trailing empty tokens are dropped.
 */
function topicSourceOf(topic, separator) {
  const tokens = topic.split(separator);
  return tokens.slice(1).some((token) => token !== '') ? tokens[0] : null;
}

/** `upstreamTopic`: what follows the source alias and the separator. */
function upstreamTopicOf(topic, separator) {
  const source = topicSourceOf(topic, separator);
  return source === null ? null : topic.slice(source.length + separator.length);
}

/** `isMM2InternalTopic`: ends with the internal separator followed by `internal`. */
function isMm2InternalTopicOf(topic, internalSeparator) {
  return topic.endsWith('internal') && topic.slice(0, -'internal'.length).endsWith(internalSeparator);
}

/** `isInternalTopic`: MM2 internal, Kafka internal (`__`, `.`), Connect internal (`-internal`, `.internal`). */
function isInternalTopicOf(topic, internalSeparator) {
  return (
    isMm2InternalTopicOf(topic, internalSeparator) ||
    topic.startsWith('__') ||
    topic.startsWith('.') ||
    topic.endsWith('-internal') ||
    topic.endsWith('.internal')
  );
}

const offsetSyncsTopicOf = (alias, i) => `mm2-offset-syncs${i}${alias}${i}internal`;
const checkpointsTopicOf = (alias, i) => `${alias}${i}checkpoints${i}internal`;

class PluginBase {
  /**
   * Reads this plugin's keys from `config`; keys nobody read are rejected afterwards. Override it to
   * read your own keys, and call `super.configure(config)` to keep the base class's keys.
   */
  configure(config) {}
}

/**
 * A replication policy answered one topic at a time (MirrorMaker 2's `ReplicationPolicy`).
 * Subclasses implement `formatRemoteTopic`, `topicSource` and `upstreamTopic` (null = none); the
 * other answers follow the defaults of MirrorMaker 2's interface (`.` in internal topic names).
 * Every answer must be a pure function of the config and the arguments: the host caches them.
 */
export class Policy extends PluginBase {
  formatRemoteTopic(sourceCluster, topic) {
    throw new Error(`${this.constructor.name}.formatRemoteTopic is not implemented`);
  }

  topicSource(topic) {
    throw new Error(`${this.constructor.name}.topicSource is not implemented`);
  }

  upstreamTopic(topic) {
    throw new Error(`${this.constructor.name}.upstreamTopic is not implemented`);
  }

  isInternalTopic(topic) {
    return isInternalTopicOf(topic, DEFAULT_SEPARATOR);
  }

  heartbeatsTopic() {
    return HEARTBEATS_TOPIC;
  }

  offsetSyncsTopic(clusterAlias) {
    return offsetSyncsTopicOf(clusterAlias, DEFAULT_SEPARATOR);
  }

  checkpointsTopic(clusterAlias) {
    return checkpointsTopicOf(clusterAlias, DEFAULT_SEPARATOR);
  }
}

/**
 * MirrorMaker 2's `DefaultReplicationPolicy`: remote topics are `<source><separator><topic>`.
 * Config keys: `separator` (string, default ".", not empty) and `internal_topic_separator_enabled`
 * (boolean, default true: internal topic names use the separator too; false: they use ".").
 */
export class DefaultReplicationPolicy extends Policy {
  constructor(separator = DEFAULT_SEPARATOR, internalTopicSeparatorEnabled = true) {
    super();
    if (separator === '') throw new ConfigError(`${SEPARATOR_KEY}: must not be empty`);
    this.separator = separator;
    this.internalTopicSeparatorEnabled = internalTopicSeparatorEnabled;
  }

  /** Reads `separator` and `internal_topic_separator_enabled`. */
  configure(config) {
    super.configure(config);
    const separator = config.string(SEPARATOR_KEY, DEFAULT_SEPARATOR);
    const enabled = config.bool(INTERNAL_TOPIC_SEPARATOR_ENABLED_KEY, true);
    if (separator === '') throw config.error(SEPARATOR_KEY, 'must not be empty');
    if (separator !== DEFAULT_SEPARATOR) {
      info(`using custom remote topic separator \`${separator}\``);
      if (!enabled) {
        warn(`internal topic names use \`${DEFAULT_SEPARATOR}\` instead of the separator \`${separator}\``);
      }
    }
    this.separator = separator;
    this.internalTopicSeparatorEnabled = enabled;
  }

  /** The separator used in internal topic names. */
  get internalSeparator() {
    return this.internalTopicSeparatorEnabled ? this.separator : DEFAULT_SEPARATOR;
  }

  /** Whether `topic` is one of MirrorMaker 2's own internal topics. */
  isMm2InternalTopic(topic) {
    return isMm2InternalTopicOf(topic, this.internalSeparator);
  }

  /** Whether `topic` is a checkpoints topic. */
  isCheckpointsTopic(topic) {
    const i = this.internalSeparator;
    return topic.endsWith(`${i}checkpoints${i}internal`);
  }

  formatRemoteTopic(sourceCluster, topic) {
    return `${sourceCluster}${this.separator}${topic}`;
  }

  topicSource(topic) {
    return topicSourceOf(topic, this.separator);
  }

  upstreamTopic(topic) {
    return upstreamTopicOf(topic, this.separator);
  }

  isInternalTopic(topic) {
    return isInternalTopicOf(topic, this.internalSeparator);
  }

  heartbeatsTopic() {
    return HEARTBEATS_TOPIC;
  }

  offsetSyncsTopic(clusterAlias) {
    return offsetSyncsTopicOf(clusterAlias, this.internalSeparator);
  }

  checkpointsTopic(clusterAlias) {
    return checkpointsTopicOf(clusterAlias, this.internalSeparator);
  }
}

/**
 * MirrorMaker 2's `IdentityReplicationPolicy`: remote topics keep their names, except heartbeat-like
 * topics (names ending in `heartbeats`), which follow the default policy, as do internal topic
 * names. `topicSource` and `upstreamTopic` are null for other topics. Same config keys as
 * `DefaultReplicationPolicy`.
 */
export class IdentityReplicationPolicy extends DefaultReplicationPolicy {
  /** Whether `topic` ends with the heartbeats topic's name. */
  looksLikeHeartbeat(topic) {
    return topic.endsWith(HEARTBEATS_TOPIC);
  }

  formatRemoteTopic(sourceCluster, topic) {
    return this.looksLikeHeartbeat(topic) ? super.formatRemoteTopic(sourceCluster, topic) : topic;
  }

  topicSource(topic) {
    return this.looksLikeHeartbeat(topic) ? super.topicSource(topic) : null;
  }

  upstreamTopic(topic) {
    return this.looksLikeHeartbeat(topic) ? super.upstreamTopic(topic) : null;
  }
}

// --- records, filters and transforms --------------------------------------------------------------

const encoder = new TextEncoder();
const strictDecoder = new TextDecoder('utf-8', { fatal: true });

/** undefined (null), a Uint8Array, or text encoded as UTF-8. */
function toBytes(value) {
  if (value === undefined || value === null) return undefined;
  if (value instanceof Uint8Array) return value;
  if (typeof value === 'string') return encoder.encode(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (value instanceof ArrayBuffer || Array.isArray(value)) return new Uint8Array(value);
  throw new TypeError(`expected bytes, a string or undefined, found ${typeof value}`);
}

function toText(bytes) {
  if (bytes === undefined) return undefined;
  try {
    return strictDecoder.decode(bytes);
  } catch {
    return undefined;
  }
}

function sameBytes(a, b) {
  if (a === undefined || b === undefined) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** What a batch says about all of its records. */
export class BatchInfo {
  constructor(sourceCluster, topic, targetTopic) {
    /** Alias of the cluster the records were read from. */
    this.sourceCluster = sourceCluster;
    /** The topic they were read from. */
    this.topic = topic;
    /** The topic the replication policy named for them on the target. */
    this.targetTopic = targetTopic;
  }
}

/** One record header; `value` is a Uint8Array or undefined (null). Text is encoded as UTF-8. */
export class Header {
  constructor(key, value = undefined) {
    this.key = key;
    this.value = toBytes(value);
  }

  /** The value as UTF-8 text; undefined when it is null or not UTF-8. */
  valueStr() {
    return toText(this.value);
  }

  /** Whether the value is exactly these bytes (or this text as UTF-8; undefined = null). */
  valueEquals(value) {
    return sameBytes(this.value, toBytes(value));
  }
}

function toHeader(h) {
  if (h instanceof Header) return h;
  return Array.isArray(h) ? new Header(h[0], h[1]) : new Header(h.key, h.value);
}

/**
 * A record as read from a source topic-partition (the WIT `kafka-record`): `partition` (Number),
 * `offset` and `timestampMs` (BigInt), `key` and `value` (Uint8Array or undefined), `headers`.
 */
export class Record {
  constructor({ partition = 0, offset = 0n, timestampMs = 0n, key, value, headers = [] } = {}) {
    this.partition = partition;
    this.offset = BigInt(offset);
    this.timestampMs = BigInt(timestampMs);
    this.key = toBytes(key);
    this.value = toBytes(value);
    this.headers = headers.map(toHeader);
  }

  /** The last header named `name` (Kafka's `lastHeader`), whatever its value. */
  headerEntry(name) {
    for (let i = this.headers.length - 1; i >= 0; i--) if (this.headers[i].key === name) return this.headers[i];
    return undefined;
  }

  /** The value of the last header named `name`; undefined when absent or null. */
  header(name) {
    return this.headerEntry(name)?.value;
  }

  /** The value of the last header named `name` as UTF-8; undefined when absent, null or not UTF-8. */
  headerStr(name) {
    return toText(this.header(name));
  }

  /** Whether the record has at least one header named `name` (null values count). */
  hasHeader(name) {
    return this.headers.some((h) => h.key === name);
  }

  /** Every header named `name`, in record order. */
  headersNamed(name) {
    return this.headers.filter((h) => h.key === name);
  }

  /** The key as UTF-8; undefined when it is null or not UTF-8. */
  keyStr() {
    return toText(this.key);
  }

  /** The value as UTF-8; undefined when it is null or not UTF-8. */
  valueStr() {
    return toText(this.value);
  }

  /** Whether the value is null. */
  isTombstone() {
    return this.value === undefined;
  }

  /**
   * A copy of this record as an output record for the batch's target topic with the input's
   * partition and timestamp; `changes` (topic, partition, timestampMs, key, value, headers) change
   * those fields.
   */
  toOutput(changes = {}) {
    return new OutputRecord({ key: this.key, value: this.value, headers: [...this.headers], ...changes });
  }
}

/**
 * A record a transform emits. `topic` undefined = the batch's target topic; `partition` undefined =
 * the input's partition; `timestampMs` undefined = the input's timestamp. Key, value and header
 * values are Uint8Array or undefined (null); text is encoded as UTF-8.
 */
export class OutputRecord {
  constructor({ topic, partition, timestampMs, key, value, headers = [] } = {}) {
    this.topic = topic ?? undefined;
    this.partition = partition ?? undefined;
    this.timestampMs = timestampMs ?? undefined;
    this.key = toBytes(key);
    this.value = toBytes(value);
    this.headers = headers.map(toHeader);
  }

  /** Appends a header; returns this record. */
  withHeader(key, value) {
    this.headers.push(new Header(key, value));
    return this;
  }

  /** Removes every header named `name`; returns this record. */
  withoutHeader(name) {
    this.headers = this.headers.filter((h) => h.key !== name);
    return this;
  }
}

/**
 * What a transform decides for one record; build it with `keep()`, `drop()`, `replace(...)` or
 * `reject(reason)`. `kind` is `keep`, `drop`, `replace` or `reject`.
 */
export class Outcome {
  constructor(kind, records = [], reason = '') {
    this.kind = kind;
    this.records = records;
    this.reason = reason;
  }
}

const KEEP = Object.freeze(new Outcome('keep'));
const DROP = Object.freeze(new Outcome('drop'));

/** Forward the record unchanged (costs nothing to send back). */
export const keep = () => KEEP;
/** Do not forward the record. */
export const drop = () => DROP;

/** Forward these output records instead: zero or more (arrays are flattened). */
export function replace(...records) {
  const flat = records.flat();
  for (const r of flat) {
    if (!(r instanceof OutputRecord)) throw new TypeError(`replace() takes OutputRecord values, found ${typeof r}`);
  }
  return new Outcome('replace', flat);
}

/** This record cannot be processed; the host applies the processor's `on_error`. */
export const reject = (reason) => new Outcome('reject', [], String(reason));

/** Decides per record whether it is mirrored: implement `keep`. */
export class Filter extends PluginBase {
  /** Whether `record` of `batch` is mirrored. */
  keep(batch, record) {
    throw new Error(`${this.constructor.name}.keep is not implemented`);
  }

  /** One flag per record, in order; by default from `keep`. */
  filterBatch(batch, records) {
    return records.map((record) => this.keep(batch, record));
  }
}

/** Rewrites, drops, fans out or re-routes records: implement `transform`. */
export class Transform extends PluginBase {
  /** What happens to `record` of `batch`: `keep()`, `drop()`, `replace(...)` or `reject(reason)`. */
  transform(batch, record) {
    throw new Error(`${this.constructor.name}.transform is not implemented`);
  }

  /** One outcome per record, in order; by default from `transform`. */
  transformBatch(batch, records) {
    return records.map((record) => this.transform(batch, record));
  }
}

// --- logging --------------------------------------------------------------------------------------

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

/** Writes `message` to the host's log at `level` (`trace`, `debug`, `info`, `warn`, `error`). */
export function log(level, message) {
  if (!LEVELS.includes(level)) {
    throw new RangeError(`unknown log level ${level}; expected one of: ${LEVELS.join(', ')}`);
  }
  hostLog(level, String(message));
}

export const trace = (message) => log('trace', message);
export const debug = (message) => log('debug', message);
export const info = (message) => log('info', message);
export const warn = (message) => log('warn', message);
export const error = (message) => log('error', message);

// --- the glue behind export* ----------------------------------------------------------------------

const kebab = (name) =>
  name
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .replace(/([A-Z])([A-Z][a-z])/g, '$1-$2')
    .toLowerCase();

/** Writes the stack of `err` to stderr, and to the host's log at debug level. */
function report(err) {
  // V8's stack starts with the description, SpiderMonkey's (in the component) with the frames
  const stack = err instanceof Error && typeof err.stack === 'string' ? err.stack.trimEnd() : '';
  const text = stack.startsWith(describe(err)) ? stack : stack ? `${describe(err)}\n${stack}` : describe(err);
  console.error(text);
  try {
    debug(text);
  } catch {
    // the host's log is best effort here
  }
}

/** The WIT error (a `{ tag, val }` value; componentize-js returns it as the error) for `err`. */
function witError(err) {
  if (err instanceof PluginError) return { tag: err.kind, val: err.message };
  if (isWitError(err)) return err; // thrown by hand as componentize-js expects it
  report(err);
  return { tag: 'failed', val: describe(err) };
}

const WIT_ERROR_TAGS = ['invalid-config', 'unsupported', 'failed'];
const isWitError = (err) =>
  typeof err === 'object' &&
  err !== null &&
  !(err instanceof Error) &&
  WIT_ERROR_TAGS.includes(err.tag) &&
  typeof err.val === 'string';


class Slot {
  constructor(cls, required) {
    if (typeof cls !== 'function' || !cls.prototype) throw new TypeError(`expected a class, found ${typeof cls}`);
    const missing = required.filter((name) => typeof cls.prototype[name] !== 'function');
    if (missing.length) throw new TypeError(`${cls.name} lacks ${missing.join(', ')}`);
    this.cls = cls;
    this.instance = undefined;
  }

  info() {
    return { name: this.cls.NAME || kebab(this.cls.name), version: this.cls.VERSION || '0.0.0' };
  }

  init(text) {
    let plugin;
    try {
      plugin = new this.cls();
      const config = Config.parse(text);
      if (typeof plugin.configure === 'function') plugin.configure(config);
      config.finish();
    } catch (err) {
      throw witError(err);
    }
    this.instance = plugin;
  }

  /** Runs `body(instance)`; every exception becomes a WIT error. */
  call(body) {
    if (this.instance === undefined) throw { tag: 'failed', val: NOT_INITIALIZED };
    try {
      return body(this.instance);
    } catch (err) {
      throw witError(err);
    }
  }

  /** Runs `body(instance)` for a function without an error channel: logs and rethrows (a trap). */
  callOrTrap(fn, body) {
    if (this.instance === undefined) {
      error(`${fn}: ${NOT_INITIALIZED}`);
      throw new Error(`${fn}: ${NOT_INITIALIZED}`);
    }
    try {
      const answer = body(this.instance);
      if (typeof answer !== 'string') throw new TypeError(`${fn} returned ${typeof answer}, expected a string`);
      return answer;
    } catch (err) {
      report(err);
      error(`${fn}: ${describe(err)}`);
      throw err instanceof Error ? err : new Error(describe(err));
    }
  }
}

function lifecycleOf(slot) {
  return {
    info: () => slot.info(),
    init: (config) => slot.init(config),
  };
}

function checkString(fn, topic, answer) {
  if (typeof answer === 'string') return answer;
  const found = answer === null ? 'null' : typeof answer;
  throw new TypeError(`${fn}(${JSON.stringify(topic)}) returned ${found}, expected a string`);
}

function checkOptionalString(fn, topic, answer) {
  if (answer === null || answer === undefined) return undefined;
  if (typeof answer === 'string') return answer;
  throw new TypeError(`${fn}(${JSON.stringify(topic)}) returned ${typeof answer}, expected a string or null`);
}

function checkCount(fn, what, got, expected) {
  if (got !== expected) throw new Failed(`${fn} answered ${got} ${what} for ${expected} records`);
}

const POLICY_METHODS = [
  'formatRemoteTopic',
  'topicSource',
  'upstreamTopic',
  'isInternalTopic',
  'heartbeatsTopic',
  'offsetSyncsTopic',
  'checkpointsTopic',
];

/**
 * `{ lifecycle, replicationPolicy }`: the exports of the `policy-plugin` world, answering through
 * an instance of `cls` (usually a `Policy` subclass):
 * `export const { lifecycle, replicationPolicy } = exportPolicy(MyPolicy);`
 */
export function exportPolicy(cls) {
  const slot = new Slot(cls, POLICY_METHODS);
  return {
    lifecycle: lifecycleOf(slot),
    replicationPolicy: {
      formatRemoteTopics: (sourceCluster, topics) =>
        slot.call((p) => topics.map((t) => checkString('formatRemoteTopic', t, p.formatRemoteTopic(sourceCluster, t)))),
      topicSources: (topics) =>
        slot.call((p) => topics.map((t) => checkOptionalString('topicSource', t, p.topicSource(t)))),
      upstreamTopics: (topics) =>
        slot.call((p) => topics.map((t) => checkOptionalString('upstreamTopic', t, p.upstreamTopic(t)))),
      isInternalTopics: (topics) => slot.call((p) => topics.map((t) => Boolean(p.isInternalTopic(t)))),
      heartbeatsTopic: () => slot.callOrTrap('heartbeatsTopic', (p) => p.heartbeatsTopic()),
      offsetSyncsTopic: (alias) => slot.callOrTrap('offsetSyncsTopic', (p) => p.offsetSyncsTopic(alias)),
      checkpointsTopic: (alias) => slot.callOrTrap('checkpointsTopic', (p) => p.checkpointsTopic(alias)),
    },
  };
}

function split(batch) {
  const info = new BatchInfo(batch.sourceCluster, batch.topic, batch.targetTopic);
  const records = batch.records.map((r) => (r instanceof Record ? r : new Record(r)));
  return [info, records];
}

/**
 * `{ lifecycle, recordFilter }`: the exports of the `filter-plugin` world, answering through an
 * instance of `cls` (usually a `Filter` subclass):
 * `export const { lifecycle, recordFilter } = exportFilter(MyFilter);`
 */
export function exportFilter(cls) {
  const slot = new Slot(cls, ['filterBatch']);
  return {
    lifecycle: lifecycleOf(slot),
    recordFilter: {
      filter: (batch) =>
        slot.call((plugin) => {
          const [info, records] = split(batch);
          const flags = Array.from(plugin.filterBatch(info, records), Boolean);
          checkCount('filter', 'flags', flags.length, records.length);
          return flags;
        }),
    },
  };
}

const optionalBigInt = (v) => (v === undefined || v === null ? undefined : BigInt(v));

function witOutcome(outcome) {
  if (!(outcome instanceof Outcome)) {
    throw new TypeError(
      `transform returned ${outcome === null ? 'null' : typeof outcome}, expected an Outcome: ` +
        'keep(), drop(), replace(...) or reject(reason)',
    );
  }
  switch (outcome.kind) {
    case 'keep':
    case 'drop':
      return { tag: outcome.kind };
    case 'reject':
      return { tag: 'reject', val: outcome.reason };
    case 'replace':
      return {
        tag: 'replace',
        val: outcome.records.map((r) => ({
          topic: r.topic ?? undefined,
          partition: r.partition ?? undefined,
          timestampMs: optionalBigInt(r.timestampMs),
          key: toBytes(r.key),
          value: toBytes(r.value),
          headers: r.headers.map((h) => ({ key: h.key, value: toBytes(h.value) })),
        })),
      };
    default:
      throw new Error(`unknown outcome kind ${outcome.kind}`);
  }
}

/**
 * `{ lifecycle, recordTransform }`: the exports of the `transform-plugin` world, answering through
 * an instance of `cls` (usually a `Transform` subclass):
 * `export const { lifecycle, recordTransform } = exportTransform(MyTransform);`
 */
export function exportTransform(cls) {
  const slot = new Slot(cls, ['transformBatch']);
  return {
    lifecycle: lifecycleOf(slot),
    recordTransform: {
      transform: (batch) =>
        slot.call((plugin) => {
          const [info, records] = split(batch);
          const outcomes = Array.from(plugin.transformBatch(info, records));
          checkCount('transform', 'outcomes', outcomes.length, records.length);
          return outcomes.map(witOutcome);
        }),
    },
  };
}

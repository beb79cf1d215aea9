// Native tests of refract-plugin.js (node --test sdk/javascript/test/). The MirrorMaker 2 cases are
// those of the Rust SDK's tests (plugins/sdk/src/mm2.rs, config.rs, worlds/policy/src/record.rs,
// __private.rs), as in sdk/python/test_refract_plugin.py.

import '../test-support/setup.mjs';
import assert from 'node:assert/strict';
import { test } from 'node:test';

const rp = await import('../refract-plugin.js');
const { logs } = await import('refract:plugin/host@0.1.0');
const {
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
  exportFilter,
  exportPolicy,
  exportTransform,
  keep,
  reject,
  replace,
} = rp;

const policy = (separator = '.', internalEnabled = true) => new DefaultReplicationPolicy(separator, internalEnabled);

function configured(cls, text) {
  const instance = new cls();
  const config = Config.parse(text);
  instance.configure(config);
  config.finish();
  return instance;
}

/** Asserts that `f` throws a ConfigError with exactly `message` (or matching a RegExp). */
function throwsConfig(f, message) {
  assert.throws(f, (err) => {
    assert.ok(err instanceof ConfigError, `not a ConfigError: ${err}`);
    if (message instanceof RegExp) assert.match(err.message, message);
    else assert.equal(err.message, message);
    return true;
  });
}

/** Asserts that `f` throws the WIT error `{ tag, val }`. */
function throwsWit(f, tag, val) {
  let thrown;
  try {
    f();
  } catch (err) {
    thrown = err;
  }
  assert.ok(thrown !== undefined, 'nothing was thrown');
  assert.ok(!(thrown instanceof Error), `an Error escaped: ${thrown?.stack}`);
  assert.equal(thrown.tag, tag);
  if (val instanceof RegExp) assert.match(thrown.val, val);
  else assert.equal(thrown.val, val);
}

/** Runs `f` with console.error captured; returns what it wrote. */
function capturingStderr(f) {
  const original = console.error;
  const lines = [];
  console.error = (...args) => lines.push(args.join(' '));
  try {
    f();
  } finally {
    console.error = original;
  }
  return lines.join('\n');
}

/** MirrorMaker 2's MirrorSourceConnector.isCycle. */
function isCycle(p, target, topic) {
  const source = p.topicSource(topic);
  if (source === null) return false;
  if (source === target) return true;
  const upstream = p.upstreamTopic(topic);
  if (upstream === null || upstream === topic) return false;
  return isCycle(p, target, upstream);
}

// --- MirrorMaker 2 policies -------------------------------------------------------------------------

test('topicSource and upstreamTopic follow Java split', () => {
  const cases = [
    ['.', 'topic1', null, null],
    ['.', '', null, null],
    ['.', '.', null, null],
    ['.', '..', null, null],
    ['.', 'a.', null, null],
    ['.', 'a..', null, null],
    ['.', '.b', '', 'b'],
    ['.', '..b', '', '.b'],
    ['.', 'a.b', 'a', 'b'],
    ['.', 'a.b.c', 'a', 'b.c'],
    ['.', 'a..b', 'a', '.b'],
    ['.', 'a.b.', 'a', 'b.'],
    ['.', 'source1.topic4', 'source1', 'topic4'],
    ['.', 'source1.source2.topic5', 'source1', 'source2.topic5'],
    ['.', 'target.source.topic1', 'target', 'source.topic1'],
    ['.', 'source.target.topic1', 'source', 'target.topic1'],
    ['.', 'us-west.heartbeats', 'us-west', 'heartbeats'],
    ['__', 'source1__topic4', 'source1', 'topic4'],
    ['__', 'source1__source2__topic5', 'source1', 'source2__topic5'],
    ['__', 'source1_topic4', null, null],
    ['__', 'a___b', 'a', '_b'],
    ['__', 'a____b', 'a', '__b'],
    ['__', 'a__', null, null],
    ['__', 'a____', null, null],
    ['__', '__b', '', 'b'],
    ['-', 'us-west.topic1', 'us', 'west.topic1'],
    ['::', 'a::b', 'a', 'b'],
    ['é', 'aébéc', 'a', 'béc'],
  ];
  for (const [separator, topic, source, upstream] of cases) {
    const p = policy(separator);
    assert.equal(p.topicSource(topic), source, `topicSource(${topic}) with ${separator}`);
    assert.equal(p.upstreamTopic(topic), upstream, `upstreamTopic(${topic}) with ${separator}`);
  }
});

test('formatRemoteTopic prepends source and separator', () => {
  const cases = [
    ['.', 'us-west', 'topic1', 'us-west.topic1'],
    ['.', 'primary', 'heartbeats', 'primary.heartbeats'],
    ['.', 'b', 'a.topic1', 'b.a.topic1'],
    ['__', 'source1', 'topic4', 'source1__topic4'],
    ['-', 'A', '', 'A-'],
  ];
  for (const [separator, source, topic, remote] of cases) {
    const p = policy(separator);
    assert.equal(p.formatRemoteTopic(source, topic), remote);
    if (topic) {
      assert.equal(p.topicSource(remote), source);
      assert.equal(p.upstreamTopic(remote), topic);
    }
  }
});

test('internal topic names', () => {
  const cases = [
    ['__', true, 'mm2-offset-syncs__CLUSTER__internal', 'CLUSTER__checkpoints__internal'],
    ['__', false, 'mm2-offset-syncs.CLUSTER.internal', 'CLUSTER.checkpoints.internal'],
    ['.', true, 'mm2-offset-syncs.CLUSTER.internal', 'CLUSTER.checkpoints.internal'],
    ['.', false, 'mm2-offset-syncs.CLUSTER.internal', 'CLUSTER.checkpoints.internal'],
    ['_', true, 'mm2-offset-syncs_CLUSTER_internal', 'CLUSTER_checkpoints_internal'],
  ];
  for (const [separator, internalEnabled, offsetSyncs, checkpoints] of cases) {
    const p = policy(separator, internalEnabled);
    assert.equal(p.offsetSyncsTopic('CLUSTER'), offsetSyncs);
    assert.equal(p.checkpointsTopic('CLUSTER'), checkpoints);
    assert.equal(p.heartbeatsTopic(), 'heartbeats');
    assert.ok(p.isInternalTopic(offsetSyncs));
    assert.ok(p.isInternalTopic(checkpoints));
    assert.ok(p.isMm2InternalTopic(offsetSyncs));
    assert.ok(p.isCheckpointsTopic(checkpoints));
    assert.ok(!p.isCheckpointsTopic(offsetSyncs));
    assert.ok(!p.isInternalTopic('heartbeats'));
  }
});

test('isInternalTopic follows MM2', () => {
  const cases = [
    ['__', true, '__consumer_offsets', true],
    ['__', true, '.hiddentopic', true],
    ['__', true, 'mm2-offsets.CLUSTER.internal', true],
    ['__', true, 'mm2-offsets-CLUSTER-internal', true],
    ['__', true, 'mm2-offsets_CLUSTER_internal', false],
    ['__', true, 'mm2-offsets__CLUSTER__internal', true],
    ['__', false, 'mm2-offsets__CLUSTER__internal', false],
    ['_', true, 'mm2-offsets_CLUSTER_internal', true],
    ['_', false, 'mm2-offsets_CLUSTER_internal', false],
    ['.', true, 'mm2-offsets_CLUSTER_internal', false],
    ['.', true, 'connect-configs', false],
    ['.', true, 'internal', false],
    ['.', true, 'topic1', false],
    ['.', true, '_single_underscore', false],
    ['.', true, 'source.topic1', false],
    ['.', true, 'source.heartbeats', false],
    ['.', true, 'x.internal', true],
  ];
  for (const [separator, internalEnabled, topic, internal] of cases) {
    assert.equal(policy(separator, internalEnabled).isInternalTopic(topic), internal, `${topic} ${separator} ${internalEnabled}`);
  }
});

test('Policy defaults match the dotted default policy', () => {
  class Bare extends Policy {
    formatRemoteTopic(sourceCluster, topic) {
      return topic;
    }
    topicSource() {
      return null;
    }
    upstreamTopic() {
      return null;
    }
  }
  const bare = new Bare();
  const dotted = new DefaultReplicationPolicy();
  for (const topic of ['__consumer_offsets', '.hidden', 'a-internal', 'a.internal', 'a_internal', 'topic1']) {
    assert.equal(bare.isInternalTopic(topic), dotted.isInternalTopic(topic));
  }
  assert.equal(bare.heartbeatsTopic(), dotted.heartbeatsTopic());
  assert.equal(bare.offsetSyncsTopic('A'), dotted.offsetSyncsTopic('A'));
  assert.equal(bare.checkpointsTopic('A'), dotted.checkpointsTopic('A'));
});

test('the default policy detects cycles like MM2', () => {
  const cases = [
    ['target.topic1', true],
    ['target.source.topic1', true],
    ['source.target.topic1', true],
    ['source.target.source.topic1', true],
    ['topic1', false],
    ['source.topic1', false],
    ['other.source.topic1', false],
    ['target.', false],
  ];
  for (const [topic, cycle] of cases) assert.equal(isCycle(new DefaultReplicationPolicy(), 'target', topic), cycle, topic);
});

test('the identity policy follows MM2', () => {
  const p = new IdentityReplicationPolicy();
  assert.equal(p.formatRemoteTopic('primary', 'topic1'), 'topic1');
  assert.equal(p.formatRemoteTopic('primary', 'a.b'), 'a.b');
  assert.equal(p.topicSource('topic1'), null);
  assert.equal(p.topicSource('primary.topic1'), null);
  assert.equal(p.upstreamTopic('primary.topic1'), null);
  assert.equal(p.formatRemoteTopic('backup', 'heartbeats'), 'backup.heartbeats');
  assert.equal(p.formatRemoteTopic('backup', 'primary.heartbeats'), 'backup.primary.heartbeats');
  assert.equal(p.formatRemoteTopic('backup', 'myheartbeats'), 'backup.myheartbeats');
  assert.equal(p.topicSource('backup.heartbeats'), 'backup');
  assert.equal(p.upstreamTopic('backup.heartbeats'), 'heartbeats');
  assert.equal(p.topicSource('heartbeats'), null);
  assert.equal(p.heartbeatsTopic(), 'heartbeats');
  assert.equal(p.offsetSyncsTopic('A'), 'mm2-offset-syncs.A.internal');
  assert.equal(p.checkpointsTopic('A'), 'A.checkpoints.internal');
  const cases = [
    ['target.topic1', false],
    ['target.source.topic1', false],
    ['source.target.topic1', false],
    ['topic1', false],
    ['othersource.topic1', false],
    ['target.heartbeats', true],
    ['target.source.heartbeats', true],
    ['source.target.heartbeats', true],
    ['heartbeats', false],
    ['othersource.heartbeats', false],
  ];
  for (const [topic, cycle] of cases) assert.equal(isCycle(p, 'target', topic), cycle, topic);
});

test('the identity policy uses the configured separator for heartbeats', () => {
  const p = configured(IdentityReplicationPolicy, 'separator = "__"\ninternal_topic_separator_enabled = false');
  assert.equal(p.formatRemoteTopic('A', 'heartbeats'), 'A__heartbeats');
  assert.equal(p.formatRemoteTopic('A', 'orders'), 'orders');
  assert.equal(p.topicSource('A__heartbeats'), 'A');
  assert.equal(p.upstreamTopic('B__A__heartbeats'), 'A__heartbeats');
  assert.equal(p.offsetSyncsTopic('A'), 'mm2-offset-syncs.A.internal');
});

test('policy config is read and checked', () => {
  let p = configured(DefaultReplicationPolicy, '');
  assert.deepEqual([p.separator, p.internalTopicSeparatorEnabled], ['.', true]);
  p = configured(DefaultReplicationPolicy, 'separator = "__"');
  assert.deepEqual([p.separator, p.internalTopicSeparatorEnabled], ['__', true]);
  logs.length = 0;
  p = configured(DefaultReplicationPolicy, 'separator = "__"\ninternal_topic_separator_enabled = false');
  assert.deepEqual([p.separator, p.internalTopicSeparatorEnabled], ['__', false]);
  assert.deepEqual(logs, [
    ['info', 'using custom remote topic separator `__`'],
    ['warn', 'internal topic names use `.` instead of the separator `__`'],
  ]);
  throwsConfig(() => configured(DefaultReplicationPolicy, 'separator = ""'), 'separator: must not be empty');
  throwsConfig(() => configured(DefaultReplicationPolicy, 'separator = 1'), 'separator: expected a string, found integer');
  throwsConfig(
    () => configured(DefaultReplicationPolicy, 'internal_topic_separator_enabled = "false"'),
    'internal_topic_separator_enabled: expected a boolean, found string',
  );
  throwsConfig(
    () => configured(DefaultReplicationPolicy, 'replication.policy.separator = "_"'),
    'replication: unknown key; expected one of: internal_topic_separator_enabled, separator',
  );
  throwsConfig(() => configured(IdentityReplicationPolicy, 'sep = "_"'), /^sep: unknown key; expected one of: /);
  throwsConfig(() => new DefaultReplicationPolicy('', true), 'separator: must not be empty');
  throwsConfig(() => configured(DefaultReplicationPolicy, 'separator = '), /^TOML parse error/);
});

// --- Config -----------------------------------------------------------------------------------------

test('empty text is an empty table', () => {
  for (const text of ['', '  \n', '# only a comment\n']) Config.parse(text).finish();
});

test('syntax errors give the position', () => {
  throwsConfig(() => Config.parse('a = 1\nb = \n'), /^TOML parse error at line 2, column \d+: [^\n]+$/);
});

test('reads typed values', () => {
  const table = Config.parse('s = "x"\nb = false\ni = 3\nf = 1.5\nl = [1, "a"]\n[t]\nk = "v"\n');
  assert.equal(table.string('s'), 'x');
  assert.equal(table.bool('b'), false);
  assert.equal(table.int('i'), 3);
  assert.equal(table.float('f'), 1.5);
  assert.deepEqual(table.list('l'), [1n, 'a']);
  assert.equal(table.string('absent'), undefined);
  assert.equal(table.string('absent2', 'dflt'), 'dflt');
  assert.equal(table.bool('absent3', true), true);
  const nested = table.table('t');
  assert.equal(nested.path, 't');
  assert.equal(nested.requiredString('k'), 'v');
  throwsConfig(() => nested.requiredString('m'), 't.m: missing');
  nested.finish();
  table.finish();
  assert.equal(Config.parse('n = 2').float('n'), 2);
  throwsConfig(() => Config.parse('n = 9007199254740993').int('n'), /^n: integer out of the range/);
});

test('wrong types name the key', () => {
  const table = Config.parse('s = 1\nb = "yes"\ni = true\nf = "x"\nl = 1\nd = 1979-05-27T07:32:00Z\ng = 1.0\n');
  const cases = [
    ['string', 's', 's: expected a string, found integer'],
    ['bool', 'b', 'b: expected a boolean, found string'],
    ['int', 'i', 'i: expected an integer, found boolean'],
    ['float', 'f', 'f: expected a number, found string'],
    ['list', 'l', 'l: expected an array, found integer'],
    ['string', 'd', 'd: expected a string, found datetime'],
    ['int', 'g', 'g: expected an integer, found float'],
  ];
  for (const [getter, key, message] of cases) throwsConfig(() => table[getter](key), message);
});

test('arrays of tables count from one', () => {
  const entries = Config.parse('[[r]]\na = "1"\n[[r]]\nb = "2"\n').tables('r');
  assert.deepEqual(
    entries.map((e) => e.path),
    ['r[1]', 'r[2]'],
  );
  throwsConfig(() => entries[1].requiredString('a'), 'r[2].a: missing');
  throwsConfig(() => entries[1].finish(), 'r[2].b: unknown key; expected one of: a');
  throwsConfig(() => Config.parse('r = [{ a = "1" }, 5]').tables('r'), 'r[2]: expected a table, found integer');
  throwsConfig(() => Config.parse('r = 5').tables('r'), 'r: expected an array of tables, found integer');
});

test('unknown keys are rejected', () => {
  const table = Config.parse('separator = "_"\nseperator = "-"\n');
  table.string('separator');
  table.bool('internal_topic_separator_enabled');
  throwsConfig(
    () => table.finish(),
    'seperator: unknown key; expected one of: internal_topic_separator_enabled, separator',
  );
  throwsConfig(() => Config.parse('x = 1').finish(), 'x: unknown key; no keys are accepted here');
});

test('reads string arrays and tables', () => {
  const table = Config.parse('a = ["x", "y"]\nb = ["x", 2]\nc = 1\n[t]\nz = "1"\ny = "2"\n[u]\nv = true\n');
  assert.deepEqual(table.strings('a'), ['x', 'y']);
  throwsConfig(() => table.strings('b'), 'b[2]: expected a string, found integer');
  throwsConfig(() => table.strings('c'), 'c: expected an array of strings, found integer');
  assert.deepEqual([...table.stringTable('t')], [
    ['y', '2'],
    ['z', '1'],
  ]);
  throwsConfig(() => table.stringTable('u'), 'u.v: expected a string, found boolean');
  assert.equal(table.strings('absent'), undefined);
  assert.equal(table.stringTable('absent'), undefined);
  assert.deepEqual(table.stringTable('absent', new Map()), new Map());
});

test('quoted keys arrive as written', () => {
  const table = Config.parse('[renames]\n"orders-v1" = "orders"\n"a.b" = "c"\nconstructor = "x"\n');
  assert.deepEqual(
    table.stringTable('renames'),
    new Map([
      ['a.b', 'c'],
      ['constructor', 'x'],
      ['orders-v1', 'orders'],
    ]),
  );
});

// --- records and outcomes ---------------------------------------------------------------------------

const bytes = (text) => new TextEncoder().encode(text);
const record = (key, value, headers = []) => new Record({ partition: 3, offset: 42n, timestampMs: 1000n, key, value, headers });

test('header lookup takes the last header', () => {
  const r = record(undefined, undefined, [
    new Header('env', 'prod'),
    new Header('trace'),
    new Header('env', 'test'),
    new Header('bin', new Uint8Array([0xff, 0xfe])),
  ]);
  const cases = [
    ['env', bytes('test'), 'test', true],
    ['trace', undefined, undefined, true],
    ['bin', new Uint8Array([0xff, 0xfe]), undefined, true],
    ['absent', undefined, undefined, false],
  ];
  for (const [name, value, text, present] of cases) {
    assert.deepEqual(r.header(name), value, name);
    assert.equal(r.headerStr(name), text, name);
    assert.equal(r.hasHeader(name), present, name);
    assert.equal(r.headerEntry(name) !== undefined, present, name);
  }
  assert.equal(r.headersNamed('env').length, 2);
  assert.ok(r.headerEntry('env').valueEquals('test'));
  assert.ok(!r.headerEntry('env').valueEquals('prod'));
  assert.ok(r.headerEntry('trace').valueEquals(undefined));
});

test('keys and values as text', () => {
  const cases = [
    [bytes('k1'), 'k1'],
    [bytes(''), ''],
    [new Uint8Array([0xc3, 0x28]), undefined],
    [undefined, undefined],
  ];
  for (const [raw, text] of cases) {
    const r = record(raw, raw);
    assert.equal(r.keyStr(), text);
    assert.equal(r.valueStr(), text);
    assert.equal(r.isTombstone(), raw === undefined);
  }
});

test('outputs copy the record and default the rest', () => {
  const r = record(bytes('k'), undefined, [new Header('h')]);
  const out = r.toOutput();
  assert.deepEqual(out, new OutputRecord({ key: bytes('k'), headers: [new Header('h')] }));
  assert.deepEqual([out.topic, out.partition, out.timestampMs], [undefined, undefined, undefined]);
  const changed = r
    .toOutput({ topic: 't2', partition: 0, timestampMs: 7n, key: undefined, value: 'v' })
    .withHeader('a', '1')
    .withoutHeader('h');
  assert.deepEqual([changed.topic, changed.partition, changed.timestampMs], ['t2', 0, 7n]);
  assert.equal(changed.key, undefined);
  assert.deepEqual(changed.value, bytes('v'));
  assert.deepEqual(changed.headers, [new Header('a', '1')]);
  assert.deepEqual(r.headers, [new Header('h')], 'the input record is unchanged');
  assert.deepEqual(replace(changed), replace([changed]));
  assert.deepEqual(replace(changed).records, [changed]);
  assert.equal(reject('bad').reason, 'bad');
  assert.equal(keep().kind, 'keep');
  assert.equal(drop().kind, 'drop');
  assert.throws(() => replace('not a record'), TypeError);
});

// --- the exports (glue) -----------------------------------------------------------------------------

class Prefixed extends Policy {
  static NAME = 'prefixed';
  static VERSION = '1.2.3';

  configure(config) {
    super.configure(config);
    this.prefix = config.string('prefix', 'mirror');
    this.boom = config.bool('boom', false);
  }

  formatRemoteTopic(sourceCluster, topic) {
    if (this.boom) throw new Error(`cannot name ${topic}`);
    if (topic === 'unsupported') throw new Unsupported('no such thing');
    if (topic === 'failed') throw new Failed('exactly this');
    if (topic === 'wit') throw { tag: 'failed', val: 'a WIT error as is' };
    if (topic === 'none') return null;
    return `${this.prefix}-${topic}`;
  }

  topicSource() {
    return null;
  }

  upstreamTopic() {
    return undefined;
  }

  offsetSyncsTopic(clusterAlias) {
    if (clusterAlias === 'boom') throw new RangeError(clusterAlias);
    return super.offsetSyncsTopic(clusterAlias);
  }
}

test('calls before init fail', () => {
  const { replicationPolicy: p } = exportPolicy(DefaultReplicationPolicy);
  throwsWit(() => p.formatRemoteTopics('a', ['t']), 'failed', 'init was not called');
  throwsWit(() => p.topicSources(['a.t']), 'failed', 'init was not called');
  throwsWit(() => p.upstreamTopics(['a.t']), 'failed', 'init was not called');
  throwsWit(() => p.isInternalTopics(['t']), 'failed', 'init was not called');
  logs.length = 0;
  assert.throws(() => p.heartbeatsTopic(), /heartbeatsTopic: init was not called/);
  assert.throws(() => p.offsetSyncsTopic('A'), /init was not called/);
  assert.throws(() => p.checkpointsTopic('A'), /init was not called/);
  assert.deepEqual(logs[0], ['error', 'heartbeatsTopic: init was not called']);
});

test('info names the class', () => {
  assert.deepEqual(exportPolicy(Prefixed).lifecycle.info(), { name: 'prefixed', version: '1.2.3' });
  class SameName extends DefaultReplicationPolicy {
    formatRemoteTopic(sourceCluster, topic) {
      return topic;
    }
  }
  assert.deepEqual(exportPolicy(SameName).lifecycle.info(), { name: 'same-name', version: '0.0.0' });
  assert.equal(exportPolicy(IdentityReplicationPolicy).lifecycle.info().name, 'identity-replication-policy');
});

test('batches answer in input order', () => {
  const { lifecycle, replicationPolicy: p } = exportPolicy(DefaultReplicationPolicy);
  lifecycle.init('separator = "_"');
  const topics = ['b_x', 'plain', '_y', 'c_d_e'];
  assert.deepEqual(p.formatRemoteTopics('src', topics), ['src_b_x', 'src_plain', 'src__y', 'src_c_d_e']);
  assert.deepEqual(p.topicSources(topics), ['b', undefined, '', 'c']);
  assert.deepEqual(p.upstreamTopics(topics), ['x', undefined, 'y', 'd_e']);
  assert.deepEqual(p.isInternalTopics(['__x', 't', 'a_internal']), [true, false, true]);
  assert.equal(p.heartbeatsTopic(), 'heartbeats');
  assert.equal(p.offsetSyncsTopic('A'), 'mm2-offset-syncs_A_internal');
  assert.equal(p.checkpointsTopic('A'), 'A_checkpoints_internal');
});

test('init errors', () => {
  const { lifecycle, replicationPolicy: p } = exportPolicy(Prefixed);
  throwsWit(() => lifecycle.init('prefix = 1'), 'invalid-config', 'prefix: expected a string, found integer');
  throwsWit(() => lifecycle.init('x = 1'), 'invalid-config', 'x: unknown key; expected one of: boom, prefix');
  throwsWit(() => lifecycle.init('prefix = '), 'invalid-config', /^TOML parse error at line 1, column \d+: /);
  throwsWit(() => p.formatRemoteTopics('a', ['t']), 'failed', 'init was not called'); // a failed init keeps the slot empty

  class Broken extends DefaultReplicationPolicy {
    configure() {
      null.x;
    }
  }
  const err = capturingStderr(() =>
    throwsWit(() => exportPolicy(Broken).lifecycle.init(''), 'failed', /^TypeError: .*null/),
  );
  assert.match(err, /^TypeError: .*\n.*configure/);
});

test('exceptions become failed errors', () => {
  const { lifecycle, replicationPolicy: p } = exportPolicy(Prefixed);
  lifecycle.init('');
  assert.deepEqual(p.formatRemoteTopics('a', ['t']), ['mirror-t']);
  assert.deepEqual(p.topicSources(['t']), [undefined]);
  assert.deepEqual(p.upstreamTopics(['t']), [undefined]);
  throwsWit(() => p.formatRemoteTopics('a', ['t', 'unsupported']), 'unsupported', 'no such thing');
  throwsWit(() => p.formatRemoteTopics('a', ['t', 'failed']), 'failed', 'exactly this');
  throwsWit(() => p.formatRemoteTopics('a', ['wit']), 'failed', 'a WIT error as is');
  const err = capturingStderr(() =>
    throwsWit(
      () => p.formatRemoteTopics('a', ['none']),
      'failed',
      'TypeError: formatRemoteTopic("none") returned null, expected a string',
    ),
  );
  assert.match(err, /^TypeError: formatRemoteTopic\("none"\)/);
  lifecycle.init('boom = true');
  logs.length = 0;
  const stack = capturingStderr(() => throwsWit(() => p.formatRemoteTopics('a', ['orders']), 'failed', 'Error: cannot name orders'));
  assert.match(stack, /^Error: cannot name orders\n.*formatRemoteTopic/);
  assert.equal(logs[0][0], 'debug');
  assert.match(logs[0][1], /^Error: cannot name orders\n/);
  // no error channel: logged, then the exception propagates (the component traps)
  logs.length = 0;
  capturingStderr(() => assert.throws(() => p.offsetSyncsTopic('boom'), RangeError));
  assert.deepEqual(logs.at(-1), ['error', 'offsetSyncsTopic: RangeError: boom']);
});

test('export rejects what is not a plugin class', () => {
  assert.throws(() => exportPolicy(new DefaultReplicationPolicy()), /expected a class/);
  class Half {
    formatRemoteTopic(sourceCluster, topic) {
      return topic;
    }
  }
  assert.throws(() => exportPolicy(Half), /Half lacks topicSource, upstreamTopic/);
});

const witRecord = (offset, key, value, headers = []) => ({
  partition: 0,
  offset: BigInt(offset),
  timestampMs: BigInt(1000 + offset),
  key: key === undefined ? undefined : bytes(key),
  value: value === undefined ? undefined : typeof value === 'string' ? bytes(value) : value,
  headers: headers.map(([k, v]) => ({ key: k, value: v === undefined ? undefined : bytes(v) })),
});
const witBatch = (records) => ({ sourceCluster: 'A', topic: 't', targetTopic: 'A.t', records });

class DropTest extends Filter {
  configure(config) {
    this.header = config.string('header', 'env');
  }

  keep(batch, record) {
    if (record.headerStr('explode') !== undefined) throw new Error(record.headerStr('explode'));
    return record.headerStr(this.header) !== 'test';
  }
}

test('filter export', () => {
  const { lifecycle, recordFilter } = exportFilter(DropTest);
  assert.equal(lifecycle.info().name, 'drop-test');
  throwsWit(() => recordFilter.filter(witBatch([])), 'failed', 'init was not called');
  lifecycle.init('');
  const batch = witBatch([
    witRecord(0, undefined, undefined, [['env', 'test']]),
    witRecord(1, undefined, undefined, [['env', 'prod']]),
    witRecord(2),
    witRecord(3, undefined, undefined, [['env', undefined]]),
  ]);
  assert.deepEqual(recordFilter.filter(batch), [false, true, true, true]);
  capturingStderr(() =>
    throwsWit(() => recordFilter.filter(witBatch([witRecord(0, undefined, undefined, [['explode', 'bang']])])), 'failed', 'Error: bang'),
  );

  class Short extends DropTest {
    filterBatch() {
      return [true];
    }
  }
  const short = exportFilter(Short);
  short.lifecycle.init('');
  throwsWit(() => short.recordFilter.filter(witBatch([witRecord(0), witRecord(1)])), 'failed', 'filter answered 1 flags for 2 records');
});

class Upper extends Transform {
  transform(batch, record) {
    if (record.isTombstone()) return drop();
    if (record.valueStr() === 'same') return keep();
    const text = record.valueStr();
    if (text === undefined) return reject('value is not UTF-8');
    if (text === 'wrong') return true;
    return replace(record.toOutput({ value: text.toUpperCase(), topic: `${batch.targetTopic}-up`, timestampMs: 5 }));
  }
}

test('transform export', () => {
  const { lifecycle, recordTransform } = exportTransform(Upper);
  lifecycle.init('');
  const out = recordTransform.transform(
    witBatch([
      witRecord(0, 'k', 'abc', [['h', '1']]),
      witRecord(1, 'k', undefined),
      witRecord(2, undefined, 'same'),
      witRecord(3, undefined, new Uint8Array([0xff])),
    ]),
  );
  assert.deepEqual(out, [
    {
      tag: 'replace',
      val: [
        { topic: 'A.t-up', partition: undefined, timestampMs: 5n, key: bytes('k'), value: bytes('ABC'), headers: [{ key: 'h', value: bytes('1') }] },
      ],
    },
    { tag: 'drop' },
    { tag: 'keep' },
    { tag: 'reject', val: 'value is not UTF-8' },
  ]);
  capturingStderr(() =>
    throwsWit(
      () => recordTransform.transform(witBatch([witRecord(0, undefined, 'wrong')])),
      'failed',
      /^TypeError: transform returned boolean, expected an Outcome/,
    ),
  );
});

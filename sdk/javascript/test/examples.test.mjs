// Native tests of the JavaScript example plugins (examples/plugins/javascript/{policy,filter}.js)
// against the table every example policy answers (examples/plugins/policy-cases.json), as
// sdk/python/test_refract_plugin.py checks the Python ones.

import '../test-support/setup.mjs';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';

const examples = new URL('../../../examples/plugins/', import.meta.url);
const CASES = JSON.parse(await readFile(new URL('policy-cases.json', examples), 'utf8'));
const policy = await import(new URL('javascript/policy.js', examples).href);
const filter = await import(new URL('javascript/filter.js', examples).href);
const { logs } = await import('refract:plugin/host@0.1.0');

const none = (v) => (v === null ? undefined : v); // option<string> none is undefined in the WIT glue

function throwsWit(f, tag, val) {
  let thrown;
  try {
    f();
  } catch (err) {
    thrown = err;
  }
  assert.ok(thrown !== undefined && !(thrown instanceof Error), `expected a WIT error, got ${thrown}`);
  assert.equal(thrown.tag, tag);
  if (val instanceof RegExp) assert.match(thrown.val, val);
  else assert.equal(thrown.val, val);
}

test('the example policy answers the shared table', () => {
  const { lifecycle, replicationPolicy: p } = policy;
  assert.deepEqual(lifecycle.info(), { name: 'example-policy-javascript', version: '0.1.0' });
  lifecycle.init(CASES.config_toml);
  const topics = CASES.topics.map((c) => c.topic);
  assert.deepEqual(p.formatRemoteTopics(CASES.source_cluster, topics), CASES.topics.map((c) => c.remote));
  assert.deepEqual(p.topicSources(topics), CASES.topics.map((c) => none(c.source)));
  assert.deepEqual(p.upstreamTopics(topics), CASES.topics.map((c) => none(c.upstream)));
  assert.deepEqual(p.isInternalTopics(topics), CASES.topics.map((c) => c.internal));
  assert.equal(p.heartbeatsTopic(), CASES.heartbeats_topic);
  for (const [alias, name] of Object.entries(CASES.offset_syncs_topics)) assert.equal(p.offsetSyncsTopic(alias), name);
  for (const [alias, name] of Object.entries(CASES.checkpoints_topics)) assert.equal(p.checkpointsTopic(alias), name);

  const sep = CASES.with_separator;
  lifecycle.init(sep.config_toml);
  assert.deepEqual(p.formatRemoteTopics('a', Object.keys(sep.remote)), Object.values(sep.remote));
  assert.deepEqual(p.topicSources(Object.keys(sep.source)), Object.values(sep.source).map(none));
  assert.equal(p.offsetSyncsTopic('b'), sep.offset_syncs_topic);
  assert.equal(p.checkpointsTopic('b'), sep.checkpoints_topic);

  for (const c of CASES.invalid_configs) throwsWit(() => lifecycle.init(c.config_toml), 'invalid-config', c.error);
});

const bytes = (text) => new TextEncoder().encode(text);
const rec = (offset, headers = []) => ({
  partition: 0,
  offset: BigInt(offset),
  timestampMs: 0n,
  key: undefined,
  value: undefined,
  headers: headers.map(([key, value]) => ({ key, value: value === undefined ? undefined : bytes(value) })),
});
const batch = (records) => ({ sourceCluster: 'a', topic: 't', targetTopic: 'a.t', records });

test('the example filter keeps its behaviour', () => {
  const { lifecycle, recordFilter } = filter;
  assert.deepEqual(lifecycle.info(), { name: 'example-filter-javascript', version: '0.1.0' });
  logs.length = 0;
  lifecycle.init('');
  assert.deepEqual(logs, [['info', 'dropping records whose header "env" equals "test"']]);
  const records = [
    rec(0, [['env', 'test']]),
    rec(1, [['env', 'prod']]),
    rec(2, [['env', undefined]]),
    rec(3, [
      ['env', 'prod'],
      ['env', 'test'],
    ]),
    rec(4),
  ];
  assert.deepEqual(recordFilter.filter(batch(records)), [false, true, true, false, true]);
  lifecycle.init('header = "stage"\nequals = "dev"');
  assert.deepEqual(recordFilter.filter(batch([rec(0, [['stage', 'dev']]), rec(1, [['env', 'test']])])), [false, true]);
  throwsWit(() => lifecycle.init('x = 1'), 'invalid-config', /^x: unknown key/);
  throwsWit(() => lifecycle.init('header = 1'), 'invalid-config', /^header: expected a string/);
  throwsWit(() => lifecycle.init('header = ""'), 'invalid-config', 'header: must not be empty');
  throwsWit(() => lifecycle.init('equals = '), 'invalid-config', /^TOML parse error at line 1/);
});

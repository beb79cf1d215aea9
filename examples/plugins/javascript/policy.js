// Example refract replication policy in JavaScript: "SameName with renames".
//
// Remote topics keep their names, except those listed in the config table `renames` (source topic
// -> target topic), and heartbeat-like topics (names ending in `heartbeats`), which are named as by
// MirrorMaker 2's default policy (`<source><separator>heartbeats`). Internal topics and their names
// are the default policy's. Config keys: `separator`, `internal_topic_separator_enabled` (as the
// default policy) and `renames` (a table of strings).

import { ConfigError, IdentityReplicationPolicy, exportPolicy } from 'refract-plugin';

class SameNameWithRenames extends IdentityReplicationPolicy {
  static NAME = 'example-policy-javascript';
  static VERSION = '0.1.0';

  configure(config) {
    super.configure(config);
    this.renames = config.stringTable('renames', new Map());
    for (const [topic, target] of this.renames) {
      if (target === '') throw new ConfigError(`renames.${topic}: must not be empty`);
    }
  }

  formatRemoteTopic(sourceCluster, topic) {
    if (this.looksLikeHeartbeat(topic)) return super.formatRemoteTopic(sourceCluster, topic);
    return this.renames.get(topic) ?? topic;
  }
}

export const { lifecycle, replicationPolicy } = exportPolicy(SameNameWithRenames);

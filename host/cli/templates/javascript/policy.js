// @NAME@: a refract replication policy (how topics are named on the target cluster).
//
// It starts as MirrorMaker 2's DefaultReplicationPolicy (`orders` from cluster `primary` becomes
// `primary.orders`), with its config keys `separator` and `internal_topic_separator_enabled`.
// Change formatRemoteTopic — the one place that names remote topics — and, if your names no longer
// carry the source alias, topicSource and upstreamTopic too (or extend IdentityReplicationPolicy).
// An error thrown here reaches refract as the call's error, its name and message first.

import { DefaultReplicationPolicy, exportPolicy } from 'refract-plugin';

class Policy extends DefaultReplicationPolicy {
  static NAME = '@NAME@';
  static VERSION = '0.1.0';

  configure(config) {
    super.configure(config); // reads separator, internal_topic_separator_enabled
    // Read keys of your own here, e.g. this.prefix = config.string('prefix', 'mirror');
    // keys nobody reads are rejected, naming them.
  }

  // CHANGE ME: the name `topic` from cluster `sourceCluster` gets on the target.
  formatRemoteTopic(sourceCluster, topic) {
    return super.formatRemoteTopic(sourceCluster, topic);
  }
}

export const { lifecycle, replicationPolicy } = exportPolicy(Policy);

"""@NAME@: a refract replication policy (how topics are named on the target cluster).

It starts as MirrorMaker 2's DefaultReplicationPolicy (`orders` from cluster `primary` becomes
`primary.orders`), with its config keys `separator` and `internal_topic_separator_enabled`.
Change format_remote_topic — the one place that names remote topics — and, if your names no
longer carry the source alias, topic_source and upstream_topic too (or extend
IdentityReplicationPolicy instead). An exception raised here reaches refract as the call's error,
type and message first.
"""

from refract_plugin import DefaultReplicationPolicy, export_policy


class Policy(DefaultReplicationPolicy):
    NAME = "@NAME@"
    VERSION = "0.1.0"

    def configure(self, config):
        super().configure(config)  # reads separator, internal_topic_separator_enabled
        # Read keys of your own here, e.g. self.prefix = config.string("prefix", "mirror");
        # keys nobody reads are rejected, naming them.

    # CHANGE ME: the name `topic` from cluster `source_cluster` gets on the target.
    def format_remote_topic(self, source_cluster, topic):
        return super().format_remote_topic(source_cluster, topic)


Lifecycle, ReplicationPolicy = export_policy(Policy)

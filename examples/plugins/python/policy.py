"""Example refract replication policy in Python: "SameName with renames".

Remote topics keep their names, except those listed in the config table `renames` (source topic
-> target topic), and heartbeat-like topics (names ending in `heartbeats`), which are named as by
MirrorMaker 2's default policy (`<source><separator>heartbeats`). Internal topics and their names
are the default policy's. Config keys: `separator`, `internal_topic_separator_enabled` (as the
default policy) and `renames` (a table of strings).
"""

from refract_plugin import ConfigError, IdentityReplicationPolicy, export_policy


class SameNameWithRenames(IdentityReplicationPolicy):
    NAME = "example-policy-python"
    VERSION = "0.1.0"

    def configure(self, config):
        super().configure(config)
        self.renames = config.string_table("renames", {})
        for topic, target in self.renames.items():
            if not target:
                raise ConfigError(f"renames.{topic}: must not be empty")

    def format_remote_topic(self, source_cluster, topic):
        if self.looks_like_heartbeat(topic):
            return super().format_remote_topic(source_cluster, topic)
        return self.renames.get(topic, topic)


Lifecycle, ReplicationPolicy = export_policy(SameNameWithRenames)

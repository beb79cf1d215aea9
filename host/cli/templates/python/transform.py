"""@NAME@: a refract record transform (rewrites, drops, fans out or re-routes records).

It starts by forwarding every record unchanged. Change transform — the one place that decides —
to return drop(), replace(record.to_output(value=b"...")), several records, or reject("why").
An exception raised here reaches refract as the call's error, type and message first, and the
processor's `on_error` applies.
"""

from refract_plugin import Transform, export_transform, keep


class MyTransform(Transform):
    NAME = "@NAME@"
    VERSION = "0.1.0"

    def configure(self, config):
        # Read keys of your own here, e.g. self.field = config.string("field", "email");
        # keys nobody reads are rejected, naming them.
        pass

    # CHANGE ME: what happens to `record`.
    def transform(self, batch, record):
        return keep()


Lifecycle, RecordTransform = export_transform(MyTransform)

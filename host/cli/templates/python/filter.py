"""@NAME@: a refract record filter (which records are mirrored).

It starts by keeping every record. Change keep — the one place that decides. An exception raised
here reaches refract as the call's error, type and message first, and the processor's `on_error`
applies.
"""

from refract_plugin import Filter, export_filter


class MyFilter(Filter):
    NAME = "@NAME@"
    VERSION = "0.1.0"

    def configure(self, config):
        # Read keys of your own here, e.g. self.header = config.string("header", "env");
        # keys nobody reads are rejected, naming them.
        pass

    # CHANGE ME: whether `record` is mirrored, e.g. `return record.header_str("env") != "test"`.
    def keep(self, batch, record):
        return True


Lifecycle, RecordFilter = export_filter(MyFilter)

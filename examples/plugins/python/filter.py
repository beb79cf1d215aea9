"""Example refract record filter in Python.

Drops every record that has a header named `header` (default "env") whose value is exactly the
UTF-8 bytes of `equals` (default "test"); keeps all others, including records whose matching
header is null.
"""

from refract_plugin import Filter, export_filter, info


class DropMatching(Filter):
    NAME = "example-filter-python"
    VERSION = "0.1.0"

    def configure(self, config):
        self.header = config.string("header", "env")
        equals = config.string("equals", "test")
        if self.header == "":
            raise config.error("header", "must not be empty")
        config.finish()
        self.equals = equals.encode()
        info(f'dropping records whose header "{self.header}" equals "{equals}"')

    def keep(self, batch, record):
        return not any(h.key == self.header and h.value == self.equals for h in record.headers)


Lifecycle, RecordFilter = export_filter(DropMatching)

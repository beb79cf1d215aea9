"""Example refract record filter in Python.

Drops every record that has a header named `header` (default "env") whose value is exactly the
UTF-8 bytes of `equals` (default "test"); keeps all others, including records whose matching
header is null.
"""

import tomllib

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types

NAME = "example-filter-python"
VERSION = "0.1.0"
DEFAULTS = {"header": "env", "equals": "test"}

header_name = DEFAULTS["header"]
drop_value = DEFAULTS["equals"].encode()


def invalid(message: str) -> Err:
    return Err(types.PluginError_InvalidConfig(message))


class Lifecycle(exports.Lifecycle):
    def info(self) -> types.PluginInfo:
        return types.PluginInfo(name=NAME, version=VERSION)

    def init(self, config: str) -> None:
        global header_name, drop_value
        try:
            table = tomllib.loads(config)
        except tomllib.TOMLDecodeError as e:
            raise invalid(f"not a TOML table: {e}")
        settings = dict(DEFAULTS)
        for key, value in table.items():
            if key not in DEFAULTS:
                raise invalid(f"{key}: unknown key (expected header or equals)")
            if not isinstance(value, str):
                raise invalid(f"{key}: expected a string")
            settings[key] = value
        if settings["header"] == "":
            raise invalid("header: must not be empty")
        header_name = settings["header"]
        drop_value = settings["equals"].encode()
        host.log(
            types.LogLevel.INFO,
            f'dropping records whose header "{header_name}" equals "{settings["equals"]}"',
        )


class RecordFilter(exports.RecordFilter):
    def filter(self, batch: types.RecordBatch) -> list[bool]:
        return [
            not any(h.key == header_name and h.value == drop_value for h in r.headers)
            for r in batch.records
        ]

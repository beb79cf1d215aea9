"""A hostile filter in Python for refract's sandbox tests.

On the record whose value equals `on` it attacks the host the way `attack` names; every other
record is kept:

- `sleep`: `time.sleep(3600)`, then keeps the record. Guest clocks are virtual and every clock
  subscription is ready at once, so the sleep must return at once instead of blocking the host.
- `huge-raise`: raises a ValueError whose message is 1 MiB long. The error text refract keeps
  (logs, dead-letter headers, `plugin test`) must be cut to a small size.

One component serves every Python attack: compiling a componentize-py component takes seconds.
Build it with build.sh beside this file.
"""

import time

from refract_plugin import Filter, export_filter

ATTACKS = ("sleep", "huge-raise")


class Hostile(Filter):
    NAME = "hostile-python"
    VERSION = "0.1.0"

    def configure(self, config):
        self.attack = config.required_string("attack")
        self.on = config.required_string("on")
        config.finish()
        if self.attack not in ATTACKS:
            raise config.error("attack", f"unknown attack `{self.attack}`, expected one of {ATTACKS}")

    def keep(self, batch, record):
        if record.value_str() != self.on:
            return True
        if self.attack == "sleep":
            time.sleep(3600)
            return True
        raise ValueError("x" * 1048576)


Lifecycle, RecordFilter = export_filter(Hostile)

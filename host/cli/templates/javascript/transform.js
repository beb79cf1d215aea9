// @NAME@: a refract record transform (rewrites, drops, fans out or re-routes records).
//
// It starts by forwarding every record unchanged. Change transform — the one place that decides —
// to return drop(), replace(record.toOutput({ value: ... })), several records, or reject('why').
// An error thrown here reaches refract as the call's error, its name and message first, and the
// processor's `on_error` applies.

import { Transform, exportTransform, keep } from 'refract-plugin';

class MyTransform extends Transform {
  static NAME = '@NAME@';
  static VERSION = '0.1.0';

  configure(config) {
    // Read keys of your own here, e.g. this.field = config.string('field', 'email');
    // keys nobody reads are rejected, naming them.
  }

  // CHANGE ME: what happens to `record`.
  transform(batch, record) {
    return keep();
  }
}

export const { lifecycle, recordTransform } = exportTransform(MyTransform);

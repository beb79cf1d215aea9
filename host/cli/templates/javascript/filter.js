// @NAME@: a refract record filter (which records are mirrored).
//
// It starts by keeping every record. Change keep — the one place that decides. An error thrown
// here reaches refract as the call's error, its name and message first, and the processor's
// `on_error` applies.

import { Filter, exportFilter } from 'refract-plugin';

class MyFilter extends Filter {
  static NAME = '@NAME@';
  static VERSION = '0.1.0';

  configure(config) {
    // Read keys of your own here, e.g. this.header = config.string('header', 'env');
    // keys nobody reads are rejected, naming them.
  }

  // CHANGE ME: whether `record` is mirrored, e.g. `return record.headerStr('env') !== 'test';`.
  keep(batch, record) {
    return true;
  }
}

export const { lifecycle, recordFilter } = exportFilter(MyFilter);

// Example refract record filter in JavaScript.
//
// Drops every record that has a header named `header` (default "env") whose value is exactly the
// UTF-8 bytes of `equals` (default "test"); keeps all others, including records whose matching
// header is null.

import { Filter, exportFilter, info } from 'refract-plugin';

class DropMatching extends Filter {
  static NAME = 'example-filter-javascript';
  static VERSION = '0.1.0';

  configure(config) {
    this.header = config.string('header', 'env');
    this.equals = config.string('equals', 'test');
    if (this.header === '') throw config.error('header', 'must not be empty');
    config.finish();
    info(`dropping records whose header "${this.header}" equals "${this.equals}"`);
  }

  keep(batch, record) {
    return !record.headers.some((h) => h.key === this.header && h.valueEquals(this.equals));
  }
}

export const { lifecycle, recordFilter } = exportFilter(DropMatching);

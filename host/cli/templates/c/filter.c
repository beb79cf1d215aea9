// @NAME@: a refract record filter (which records are mirrored).
//
// It starts by keeping every record. Change keep() — the one place that decides.

#include <stdbool.h>
#include <stdlib.h>

#include "filter_plugin.h"
#include "refract_plugin.h"

#define NAME "@NAME@"
#define VERSION "0.1.0"

// CHANGE ME: whether `record` is mirrored. E.g. drop records with the header env=test:
//   for (size_t i = 0; i < record->headers.len; i++) {
//     const refract_plugin_types_header_t *h = &record->headers.ptr[i];
//     if (refract_eq_cstr(REFRACT_VIEW(h->key), "env") && h->value.is_some &&
//         refract_eq_cstr(REFRACT_VIEW(h->value.val), "test")) return false;
//   }
static bool keep(const refract_plugin_types_kafka_record_t *record) {
  (void)record;
  return true;
}

// ---- exports (the canonical ABI: free the arguments, return malloc'd results) ----------------

void exports_refract_plugin_lifecycle_info(exports_refract_plugin_lifecycle_plugin_info_t *ret) {
  filter_plugin_string_dup(&ret->name, NAME);
  filter_plugin_string_dup(&ret->version, VERSION);
}

bool exports_refract_plugin_lifecycle_init(filter_plugin_string_t *config,
                                           exports_refract_plugin_lifecycle_plugin_error_t *err) {
  // Read keys of your own with refract_config_begin/next/end (see refract_plugin.h); this one
  // takes none, so any key is an error naming it.
  refract_config_t c;
  refract_buf_t message = {0};
  refract_config_begin(&c, REFRACT_VIEW(*config));
  if (refract_config_next(&c, &message) > 0) message = refract_config_error(&c, 1, "unknown key; this plugin takes no config");
  refract_config_end(&c);
  filter_plugin_string_free(config);
  if (!message.ptr) return true;
  err->tag = REFRACT_PLUGIN_TYPES_PLUGIN_ERROR_INVALID_CONFIG;
  REFRACT_MOVE(err->val.invalid_config, message);
  return false;
}

bool exports_refract_plugin_record_filter_filter(
    exports_refract_plugin_record_filter_record_batch_t *batch, filter_plugin_list_bool_t *ret,
    exports_refract_plugin_record_filter_plugin_error_t *err) {
  (void)err;
  size_t n = batch->records.len;
  ret->len = n;
  ret->ptr = n ? refract_alloc(n * sizeof(bool)) : NULL;
  for (size_t i = 0; i < n; i++) ret->ptr[i] = keep(&batch->records.ptr[i]);
  exports_refract_plugin_record_filter_record_batch_free(batch);
  return true;
}

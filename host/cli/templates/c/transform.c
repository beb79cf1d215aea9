// @NAME@: a refract record transform (rewrites, drops, fans out or re-routes records).
//
// It starts by forwarding every record unchanged. Change transform() — the one place that
// decides — to set out->tag to REFRACT_PLUGIN_TYPES_OUTCOME_DROP, _REPLACE (with out->val.replace,
// a malloc'd list of output records) or _REJECT (with out->val.reject, a malloc'd reason).

#include <stdbool.h>
#include <stdlib.h>

#include "refract_plugin.h"
#include "transform_plugin.h"

#define NAME "@NAME@"
#define VERSION "0.1.0"

// CHANGE ME: what happens to `record`.
static void transform(const refract_plugin_types_kafka_record_t *record,
                      refract_plugin_types_outcome_t *out) {
  (void)record;
  out->tag = REFRACT_PLUGIN_TYPES_OUTCOME_KEEP;
}

// ---- exports (the canonical ABI: free the arguments, return malloc'd results) ----------------

void exports_refract_plugin_lifecycle_info(exports_refract_plugin_lifecycle_plugin_info_t *ret) {
  transform_plugin_string_dup(&ret->name, NAME);
  transform_plugin_string_dup(&ret->version, VERSION);
}

bool exports_refract_plugin_lifecycle_init(transform_plugin_string_t *config,
                                           exports_refract_plugin_lifecycle_plugin_error_t *err) {
  // Read keys of your own with refract_config_begin/next/end (see refract_plugin.h); this one
  // takes none, so any key is an error naming it.
  refract_config_t c;
  refract_buf_t message = {0};
  refract_config_begin(&c, REFRACT_VIEW(*config));
  if (refract_config_next(&c, &message) > 0) message = refract_config_error(&c, 1, "unknown key; this plugin takes no config");
  refract_config_end(&c);
  transform_plugin_string_free(config);
  if (!message.ptr) return true;
  err->tag = REFRACT_PLUGIN_TYPES_PLUGIN_ERROR_INVALID_CONFIG;
  REFRACT_MOVE(err->val.invalid_config, message);
  return false;
}

bool exports_refract_plugin_record_transform_transform(
    exports_refract_plugin_record_transform_record_batch_t *batch,
    exports_refract_plugin_record_transform_list_outcome_t *ret,
    exports_refract_plugin_record_transform_plugin_error_t *err) {
  (void)err;
  size_t n = batch->records.len;
  ret->len = n;
  ret->ptr = n ? refract_alloc(n * sizeof *ret->ptr) : NULL;
  for (size_t i = 0; i < n; i++) transform(&batch->records.ptr[i], &ret->ptr[i]);
  exports_refract_plugin_record_transform_record_batch_free(batch);
  return true;
}

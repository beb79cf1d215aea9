// Example refract record filter in C.
//
// Drops every record that has a header named `header` (default "env") whose value is exactly the
// UTF-8 bytes of `equals` (default "test"); keeps all others, including records whose matching
// header is null.

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "filter_plugin.h"
#include "refract_plugin.h"

#define NAME "example-filter-c"
#define VERSION "0.1.0"
#define UNKNOWN_KEY "unknown key (expected header or equals)"

// NUL-terminated, but len is authoritative (a TOML string may hold "\u0000").
static refract_buf_t header_name;
static refract_buf_t drop_value;

// On success replaces header_name and drop_value; otherwise returns the malloc'd error text.
static refract_buf_t parse_config(refract_str_t text) {
  refract_buf_t settings[2] = {{0}, {0}};  // header, equals
  refract_buf_t err = {0};
  refract_config_t c;
  refract_config_begin(&c, text);
  while (!err.ptr && refract_config_next(&c, &err) > 0) {
    refract_str_t key = c.part[0];
    int slot = refract_eq_cstr(key, "header") ? 0 : refract_eq_cstr(key, "equals") ? 1 : -1;
    if (slot < 0) err = refract_config_error(&c, 1, UNKNOWN_KEY);
    else if (c.depth > 1 || c.type != REFRACT_CONFIG_STRING)
      err = refract_config_error(&c, 1, "expected a string");
    else if (settings[slot].ptr) err = refract_config_error(&c, 1, "duplicate key");
    else settings[slot] = refract_config_take_string(&c);
  }
  refract_config_end(&c);
  if (!settings[0].ptr) settings[0] = refract_dup_cstr("env");
  if (!settings[1].ptr) settings[1] = refract_dup_cstr("test");
  if (!err.ptr && settings[0].len == 0) err = refract_dup_cstr("header: must not be empty");
  if (err.ptr) {
    refract_buf_free(&settings[0]);
    refract_buf_free(&settings[1]);
    return err;
  }
  refract_buf_free(&header_name);
  refract_buf_free(&drop_value);
  header_name = settings[0];
  drop_value = settings[1];
  return err;
}

// ---- exports ---------------------------------------------------------------------------------

void exports_refract_plugin_lifecycle_info(exports_refract_plugin_lifecycle_plugin_info_t *ret) {
  filter_plugin_string_dup(&ret->name, NAME);
  filter_plugin_string_dup(&ret->version, VERSION);
}

bool exports_refract_plugin_lifecycle_init(filter_plugin_string_t *config,
                                           exports_refract_plugin_lifecycle_plugin_error_t *err) {
  refract_buf_t message = parse_config(REFRACT_VIEW(*config));
  filter_plugin_string_free(config);
  if (message.ptr) {
    err->tag = REFRACT_PLUGIN_TYPES_PLUGIN_ERROR_INVALID_CONFIG;
    REFRACT_MOVE(err->val.invalid_config, message);
    return false;
  }
  filter_plugin_string_t line;
  REFRACT_MOVE(line, REFRACT_JOIN(REFRACT_LIT("dropping records whose header \""),
                                  refract_buf_view(header_name), REFRACT_LIT("\" equals \""),
                                  refract_buf_view(drop_value), REFRACT_LIT("\"")));
  refract_plugin_host_log(REFRACT_PLUGIN_TYPES_LOG_LEVEL_INFO, &line);
  filter_plugin_string_free(&line);
  return true;
}

static bool matches(const refract_plugin_types_header_t *h) {
  return refract_eq(REFRACT_VIEW(h->key), refract_buf_view(header_name)) && h->value.is_some &&
         refract_eq(REFRACT_VIEW(h->value.val), refract_buf_view(drop_value));
}

bool exports_refract_plugin_record_filter_filter(
    exports_refract_plugin_record_filter_record_batch_t *batch, filter_plugin_list_bool_t *ret,
    exports_refract_plugin_record_filter_plugin_error_t *err) {
  (void)err;
  size_t n = batch->records.len;
  ret->len = n;
  ret->ptr = n ? refract_alloc(n * sizeof(bool)) : NULL;
  for (size_t i = 0; i < n; i++) {
    const refract_plugin_types_kafka_record_t *r = &batch->records.ptr[i];
    bool keep = true;
    for (size_t j = 0; keep && j < r->headers.len; j++) keep = !matches(&r->headers.ptr[j]);
    ret->ptr[i] = keep;
  }
  exports_refract_plugin_record_filter_record_batch_free(batch);
  return true;
}

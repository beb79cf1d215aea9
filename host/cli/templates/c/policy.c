// @NAME@: a refract replication policy (how topics are named on the target cluster).
//
// It starts as MirrorMaker 2's DefaultReplicationPolicy (`orders` from cluster `primary` becomes
// `primary.orders`), with its config keys `separator` and `internal_topic_separator_enabled`.
// Change remote_name() — the one place that names remote topics — and, if your names no longer
// carry the source alias, source_of() and upstream_of().

#include <stdbool.h>
#include <stdlib.h>

#include "policy_plugin.h"
#include "refract_plugin.h"

#define NAME "@NAME@"
#define VERSION "0.1.0"

static refract_buf_t separator_buf;
static bool internal_separator_enabled = true;

static refract_str_t separator(void) { return refract_buf_view(separator_buf); }
static refract_str_t internal_separator(void) {
  return refract_mm2_internal_separator(separator(), internal_separator_enabled);
}

// CHANGE ME: the name `topic` from cluster `source` gets on the target (a malloc'd buffer).
static refract_buf_t remote_name(refract_str_t source, refract_str_t topic) {
  return refract_mm2_format_remote_topic(source, separator(), topic);
}

// The cluster a topic came from, and its name one hop upstream (false: a local topic).
static bool source_of(refract_str_t topic, refract_str_t *out) {
  return refract_mm2_topic_source(topic, separator(), out);
}
static bool upstream_of(refract_str_t topic, refract_str_t *out) {
  return refract_mm2_upstream_topic(topic, separator(), out);
}

// Reads the config; returns an empty buffer, or the malloc'd error text naming the key.
static refract_buf_t read_config(refract_str_t text) {
  refract_config_t c;
  refract_buf_t err = {0}, sep = {0};
  bool enabled = true;
  refract_config_begin(&c, text);
  while (!err.ptr && refract_config_next(&c, &err) > 0) {
    refract_str_t key = c.part[0];
    if (refract_eq_cstr(key, "separator")) {
      if (c.depth > 1 || c.type != REFRACT_CONFIG_STRING) err = refract_config_type_error(&c, 1, "a string");
      else if (c.str.len == 0) err = refract_config_error(&c, 1, "must not be empty");
      else sep = refract_config_take_string(&c);
    } else if (refract_eq_cstr(key, "internal_topic_separator_enabled")) {
      if (c.depth > 1 || c.type != REFRACT_CONFIG_BOOL) err = refract_config_type_error(&c, 1, "a boolean");
      else enabled = c.boolean;
    } else {
      err = refract_config_unknown_key(&c, 1, "internal_topic_separator_enabled, separator");
    }
  }
  refract_config_end(&c);
  if (err.ptr) {
    refract_buf_free(&sep);
    return err;
  }
  refract_buf_free(&separator_buf);
  separator_buf = sep.ptr ? sep : refract_dup_cstr(REFRACT_MM2_DEFAULT_SEPARATOR);
  internal_separator_enabled = enabled;
  return err;
}

// ---- exports (the canonical ABI: free the arguments, return malloc'd results) ----------------

void exports_refract_plugin_lifecycle_info(exports_refract_plugin_lifecycle_plugin_info_t *ret) {
  policy_plugin_string_dup(&ret->name, NAME);
  policy_plugin_string_dup(&ret->version, VERSION);
}

bool exports_refract_plugin_lifecycle_init(policy_plugin_string_t *config,
                                           exports_refract_plugin_lifecycle_plugin_error_t *err) {
  refract_buf_t message = read_config(REFRACT_VIEW(*config));
  policy_plugin_string_free(config);
  if (!message.ptr) return true;
  err->tag = REFRACT_PLUGIN_TYPES_PLUGIN_ERROR_INVALID_CONFIG;
  REFRACT_MOVE(err->val.invalid_config, message);
  return false;
}

static void *alloc_list(size_t n, size_t size) { return n ? refract_alloc(n * size) : NULL; }

bool exports_refract_plugin_replication_policy_format_remote_topics(
    policy_plugin_string_t *source_cluster, policy_plugin_list_string_t *topics,
    policy_plugin_list_string_t *ret, exports_refract_plugin_replication_policy_plugin_error_t *err) {
  (void)err;
  ret->len = topics->len;
  ret->ptr = alloc_list(topics->len, sizeof *ret->ptr);
  for (size_t i = 0; i < topics->len; i++)
    REFRACT_MOVE(ret->ptr[i], remote_name(REFRACT_VIEW(*source_cluster), REFRACT_VIEW(topics->ptr[i])));
  policy_plugin_string_free(source_cluster);
  policy_plugin_list_string_free(topics);
  return true;
}

static void optional_answers(policy_plugin_list_string_t *topics, policy_plugin_list_option_string_t *ret,
                             bool (*answer)(refract_str_t, refract_str_t *)) {
  ret->len = topics->len;
  ret->ptr = alloc_list(topics->len, sizeof *ret->ptr);
  for (size_t i = 0; i < topics->len; i++) {
    refract_str_t out;
    ret->ptr[i].is_some = answer(REFRACT_VIEW(topics->ptr[i]), &out);
    if (ret->ptr[i].is_some) REFRACT_MOVE(ret->ptr[i].val, refract_dup(out));
  }
  policy_plugin_list_string_free(topics);
}

bool exports_refract_plugin_replication_policy_topic_sources(
    policy_plugin_list_string_t *topics, policy_plugin_list_option_string_t *ret,
    exports_refract_plugin_replication_policy_plugin_error_t *err) {
  (void)err;
  optional_answers(topics, ret, source_of);
  return true;
}

bool exports_refract_plugin_replication_policy_upstream_topics(
    policy_plugin_list_string_t *topics, policy_plugin_list_option_string_t *ret,
    exports_refract_plugin_replication_policy_plugin_error_t *err) {
  (void)err;
  optional_answers(topics, ret, upstream_of);
  return true;
}

bool exports_refract_plugin_replication_policy_is_internal_topics(
    policy_plugin_list_string_t *topics, policy_plugin_list_bool_t *ret,
    exports_refract_plugin_replication_policy_plugin_error_t *err) {
  (void)err;
  ret->len = topics->len;
  ret->ptr = alloc_list(topics->len, sizeof *ret->ptr);
  for (size_t i = 0; i < topics->len; i++)
    ret->ptr[i] = refract_mm2_is_internal_topic(REFRACT_VIEW(topics->ptr[i]), internal_separator());
  policy_plugin_list_string_free(topics);
  return true;
}

void exports_refract_plugin_replication_policy_heartbeats_topic(policy_plugin_string_t *ret) {
  REFRACT_MOVE(*ret, refract_mm2_heartbeats_topic());
}

void exports_refract_plugin_replication_policy_offset_syncs_topic(policy_plugin_string_t *alias,
                                                                  policy_plugin_string_t *ret) {
  REFRACT_MOVE(*ret, refract_mm2_offset_syncs_topic(REFRACT_VIEW(*alias), internal_separator()));
  policy_plugin_string_free(alias);
}

void exports_refract_plugin_replication_policy_checkpoints_topic(policy_plugin_string_t *alias,
                                                                 policy_plugin_string_t *ret) {
  REFRACT_MOVE(*ret, refract_mm2_checkpoints_topic(REFRACT_VIEW(*alias), internal_separator()));
  policy_plugin_string_free(alias);
}

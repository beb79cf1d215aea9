;; hostile-memory: a transform component (world transform-plugin) that attacks refract's memory
;; budget with what Rust cannot express: one core module with four linear memories (multi-memory)
;; and a funcref table. Written by hand in WAT; the integration tests compile it with the `wat`
;; crate (tests/support/hostile.rs), so nothing here is built by cargo.
;;
;; `transform` keeps every record, except on a record whose value is
;;   "memory": it grows each of the four memories by 64 MiB in turn, writing every new page
;;             (memory.fill) so the memory is really resident, round after round until a grow
;;             fails (refract traps there: "memory budget"); if every grow of a round is refused
;;             without a trap, it goes on as for "tables";
;;   "tables": it grows the table by 100,000,000 elements (800 MB at 8 bytes an element);
;; and if the host refuses all of that without trapping, the call returns
;; failed("hostile-memory: every grow was refused without a trap").
;;
;; Each memory declares a maximum of 256 MiB so that a host with no budget at all fails the tests
;; (at most 4 x 192 MiB resident, far past their bound) without taking the machine down with it.
;;
;; ABI: memory 0 is the canonical ABI's memory; `cabi_realloc` is a bump allocator over it from
;; 1024 on, reset by each export's post-return. Addresses 16-127 hold constant strings, 128-143
;; the return area. Layouts (canonical ABI): kafka-record is 56 bytes, align 8, its `value`
;; option at 36 (discriminant), 40 (pointer), 44 (length); an outcome is 12 bytes (discriminant,
;; then payload at 4); result<list<outcome>, plugin-error> is a discriminant at 0 and its payload
;; at 4 (ok: pointer, length; error: plugin-error discriminant at 4, string at 8 and 12).
(component
  (type $ty-types
    (instance
      (type (;0;) (enum "trace" "debug" "info" "warn" "error"))
      (export (;1;) "log-level" (type (eq 0)))
      (type (;2;) (variant (case "invalid-config" string) (case "unsupported" string) (case "failed" string)))
      (export (;3;) "plugin-error" (type (eq 2)))
      (type (;4;) (record (field "name" string) (field "version" string)))
      (export (;5;) "plugin-info" (type (eq 4)))
      (type (;6;) (list u8))
      (type (;7;) (option 6))
      (type (;8;) (record (field "key" string) (field "value" 7)))
      (export (;9;) "header" (type (eq 8)))
      (type (;10;) (list 9))
      (type (;11;) (record (field "partition" s32) (field "offset" s64) (field "timestamp-ms" s64) (field "key" 7) (field "value" 7) (field "headers" 10)))
      (export (;12;) "kafka-record" (type (eq 11)))
      (type (;13;) (list 12))
      (type (;14;) (record (field "source-cluster" string) (field "topic" string) (field "target-topic" string) (field "records" 13)))
      (export (;15;) "record-batch" (type (eq 14)))
      (type (;16;) (option string))
      (type (;17;) (option s32))
      (type (;18;) (option s64))
      (type (;19;) (record (field "topic" 16) (field "partition" 17) (field "timestamp-ms" 18) (field "key" 7) (field "value" 7) (field "headers" 10)))
      (export (;20;) "output-record" (type (eq 19)))
      (type (;21;) (list 20))
      (type (;22;) (variant (case "keep") (case "drop") (case "replace" 21) (case "reject" string)))
      (export (;23;) "outcome" (type (eq 22)))
    )
  )
  (import "refract:plugin/types@0.1.0" (instance $types (type $ty-types)))
  (alias export $types "plugin-error" (type $plugin-error))
  (alias export $types "plugin-info" (type $plugin-info))
  (alias export $types "header" (type $header))
  (alias export $types "kafka-record" (type $kafka-record))
  (alias export $types "record-batch" (type $record-batch))
  (alias export $types "output-record" (type $output-record))
  (alias export $types "outcome" (type $outcome))

  (core module $main
    (memory $m0 (export "memory") 1 4096)
    (memory $m1 1 4096)
    (memory $m2 1 4096)
    (memory $m3 1 4096)
    (table $t 1 funcref)
    (global $heap (mut i32) (i32.const 1024))

    (data (memory $m0) (i32.const 16) "hostile-memory")
    (data (memory $m0) (i32.const 32) "0.1.0")
    (data (memory $m0) (i32.const 48) "memory")
    (data (memory $m0) (i32.const 56) "tables")
    (data (memory $m0) (i32.const 64) "hostile-memory: every grow was refused without a trap")

    ;; The canonical ABI's allocator: a bump allocator over memory 0, growing it when needed.
    (func $realloc (export "cabi_realloc")
      (param $old i32) (param $old_size i32) (param $align i32) (param $new_size i32) (result i32)
      (local $ptr i32) (local $end i32)
      (local.set $ptr
        (i32.and
          (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get $align))))
      (local.set $end (i32.add (local.get $ptr) (local.get $new_size)))
      (if (i32.gt_u (local.get $end) (i32.mul (memory.size $m0) (i32.const 65536)))
        (then
          (if (i32.eq
                (memory.grow $m0
                  (i32.add
                    (i32.div_u
                      (i32.sub (local.get $end) (i32.mul (memory.size $m0) (i32.const 65536)))
                      (i32.const 65536))
                    (i32.const 1)))
                (i32.const -1))
            (then unreachable))))
      (global.set $heap (local.get $end))
      (if (i32.and (i32.ne (local.get $old) (i32.const 0)) (i32.ne (local.get $old_size) (i32.const 0)))
        (then
          (memory.copy $m0 $m0
            (local.get $ptr)
            (local.get $old)
            (select (local.get $old_size) (local.get $new_size)
              (i32.lt_u (local.get $old_size) (local.get $new_size))))))
      (local.get $ptr))

    ;; Post-return of every export: whatever the call allocated is no longer needed.
    (func $reset (export "cabi_post_reset") (param i32)
      (global.set $heap (i32.const 1024)))

    (func (export "refract:plugin/lifecycle@0.1.0#info") (result i32)
      (i32.store $m0 offset=0 (i32.const 128) (i32.const 16))
      (i32.store $m0 offset=4 (i32.const 128) (i32.const 14))
      (i32.store $m0 offset=8 (i32.const 128) (i32.const 32))
      (i32.store $m0 offset=12 (i32.const 128) (i32.const 5))
      (i32.const 128))

    (func (export "refract:plugin/lifecycle@0.1.0#init") (param i32 i32) (result i32)
      (i32.store8 $m0 (i32.const 128) (i32.const 0))
      (i32.const 128))

    ;; Whether the `len` bytes at `ptr` are the six-byte marker at `marker`.
    (func $is (param $ptr i32) (param $len i32) (param $marker i32) (result i32)
      (if (i32.ne (local.get $len) (i32.const 6)) (then (return (i32.const 0))))
      (i32.and
        (i32.eq (i32.load $m0 (local.get $ptr)) (i32.load $m0 (local.get $marker)))
        (i32.eq
          (i32.load16_u $m0 offset=4 (local.get $ptr))
          (i32.load16_u $m0 offset=4 (local.get $marker)))))

    ;; Grows memory `m` by 64 MiB and writes the new pages; 1 if the grow was refused.
    (func $grow0 (result i32) (local $old i32)
      (local.set $old (memory.grow $m0 (i32.const 1024)))
      (if (i32.eq (local.get $old) (i32.const -1)) (then (return (i32.const 1))))
      (memory.fill $m0 (i32.mul (local.get $old) (i32.const 65536)) (i32.const 0xab) (i32.const 0x4000000))
      (i32.const 0))
    (func $grow1 (result i32) (local $old i32)
      (local.set $old (memory.grow $m1 (i32.const 1024)))
      (if (i32.eq (local.get $old) (i32.const -1)) (then (return (i32.const 1))))
      (memory.fill $m1 (i32.mul (local.get $old) (i32.const 65536)) (i32.const 0xab) (i32.const 0x4000000))
      (i32.const 0))
    (func $grow2 (result i32) (local $old i32)
      (local.set $old (memory.grow $m2 (i32.const 1024)))
      (if (i32.eq (local.get $old) (i32.const -1)) (then (return (i32.const 1))))
      (memory.fill $m2 (i32.mul (local.get $old) (i32.const 65536)) (i32.const 0xab) (i32.const 0x4000000))
      (i32.const 0))
    (func $grow3 (result i32) (local $old i32)
      (local.set $old (memory.grow $m3 (i32.const 1024)))
      (if (i32.eq (local.get $old) (i32.const -1)) (then (return (i32.const 1))))
      (memory.fill $m3 (i32.mul (local.get $old) (i32.const 65536)) (i32.const 0xab) (i32.const 0x4000000))
      (i32.const 0))

    ;; Rounds of growing every memory, until a whole round is refused.
    (func $grow_memories
      (loop $round
        (br_if $round
          (i32.lt_u
            (i32.add
              (i32.add (call $grow0) (call $grow1))
              (i32.add (call $grow2) (call $grow3)))
            (i32.const 4)))))

    (func $grow_table
      (drop (table.grow $t (ref.null func) (i32.const 100000000))))

    ;; transform(batch): the batch's four lists flattened as (pointer, length) pairs.
    (func (export "refract:plugin/record-transform@0.1.0#transform")
      (param $cluster i32) (param $cluster_len i32) (param $topic i32) (param $topic_len i32)
      (param $target i32) (param $target_len i32) (param $records i32) (param $n i32)
      (result i32)
      (local $i i32) (local $record i32) (local $outcomes i32)
      (loop $each
        (if (i32.lt_u (local.get $i) (local.get $n))
          (then
            (local.set $record (i32.add (local.get $records) (i32.mul (local.get $i) (i32.const 56))))
            (if (i32.load8_u $m0 offset=36 (local.get $record))
              (then
                (if (call $is
                      (i32.load $m0 offset=40 (local.get $record))
                      (i32.load $m0 offset=44 (local.get $record))
                      (i32.const 48))
                  (then (call $grow_memories) (call $grow_table)
                        (return (call $refused))))
                (if (call $is
                      (i32.load $m0 offset=40 (local.get $record))
                      (i32.load $m0 offset=44 (local.get $record))
                      (i32.const 56))
                  (then (call $grow_table)
                        (return (call $refused))))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $each))))
      ;; Every record kept: n outcomes of discriminant 0.
      (local.set $outcomes
        (call $realloc (i32.const 0) (i32.const 0) (i32.const 4) (i32.mul (local.get $n) (i32.const 12))))
      (memory.fill $m0 (local.get $outcomes) (i32.const 0) (i32.mul (local.get $n) (i32.const 12)))
      (i32.store8 $m0 (i32.const 128) (i32.const 0))
      (i32.store $m0 offset=4 (i32.const 128) (local.get $outcomes))
      (i32.store $m0 offset=8 (i32.const 128) (local.get $n))
      (i32.const 128))

    ;; err(failed("hostile-memory: every grow was refused without a trap"))
    (func $refused (result i32)
      (i32.store8 $m0 (i32.const 128) (i32.const 1))
      (i32.store8 $m0 offset=4 (i32.const 128) (i32.const 2))
      (i32.store $m0 offset=8 (i32.const 128) (i32.const 64))
      (i32.store $m0 offset=12 (i32.const 128) (i32.const 53))
      (i32.const 128))
  )
  (core instance $main (instantiate $main))
  (alias core export $main "memory" (core memory $memory))
  (alias core export $main "cabi_realloc" (core func $realloc))
  (alias core export $main "cabi_post_reset" (core func $post))

  (type $info-type (func (result $plugin-info)))
  (func $info (type $info-type)
    (canon lift (core func $main "refract:plugin/lifecycle@0.1.0#info")
      (memory $memory) string-encoding=utf8 (post-return $post)))
  (type $init-result (result (error $plugin-error)))
  (type $init-type (func (param "config" string) (result $init-result)))
  (func $init (type $init-type)
    (canon lift (core func $main "refract:plugin/lifecycle@0.1.0#init")
      (memory $memory) (realloc $realloc) string-encoding=utf8 (post-return $post)))
  (type $outcomes (list $outcome))
  (type $transform-result (result $outcomes (error $plugin-error)))
  (type $transform-type (func (param "batch" $record-batch) (result $transform-result)))
  (func $transform (type $transform-type)
    (canon lift (core func $main "refract:plugin/record-transform@0.1.0#transform")
      (memory $memory) (realloc $realloc) string-encoding=utf8 (post-return $post)))

  ;; The exported interfaces, their types named as the WIT names them (as wit-component does).
  (component $lifecycle-shim
    (type (;0;) (variant (case "invalid-config" string) (case "unsupported" string) (case "failed" string)))
    (import "import-type-plugin-error" (type (;1;) (eq 0)))
    (type (;2;) (record (field "name" string) (field "version" string)))
    (import "import-type-plugin-info" (type (;3;) (eq 2)))
    (type (;4;) (func (result 3)))
    (import "import-func-info" (func (;0;) (type 4)))
    (type (;5;) (result (error 1)))
    (type (;6;) (func (param "config" string) (result 5)))
    (import "import-func-init" (func (;1;) (type 6)))
    (export (;7;) "plugin-error" (type 1))
    (export (;8;) "plugin-info" (type 3))
    (type (;9;) (func (result 8)))
    (export (;2;) "info" (func 0) (func (type 9)))
    (type (;10;) (result (error 7)))
    (type (;11;) (func (param "config" string) (result 10)))
    (export (;3;) "init" (func 1) (func (type 11)))
  )
  (instance $lifecycle (instantiate $lifecycle-shim
    (with "import-func-info" (func $info))
    (with "import-func-init" (func $init))
    (with "import-type-plugin-error" (type $plugin-error))
    (with "import-type-plugin-info" (type $plugin-info))))
  (export "refract:plugin/lifecycle@0.1.0" (instance $lifecycle))

  (component $transform-shim
    (type (;0;) (list u8))
    (type (;1;) (option 0))
    (type (;2;) (record (field "key" string) (field "value" 1)))
    (import "import-type-header" (type (;3;) (eq 2)))
    (type (;4;) (list 3))
    (type (;5;) (record (field "partition" s32) (field "offset" s64) (field "timestamp-ms" s64) (field "key" 1) (field "value" 1) (field "headers" 4)))
    (import "import-type-kafka-record" (type (;6;) (eq 5)))
    (type (;7;) (list 6))
    (type (;8;) (record (field "source-cluster" string) (field "topic" string) (field "target-topic" string) (field "records" 7)))
    (import "import-type-record-batch" (type (;9;) (eq 8)))
    (type (;10;) (option string))
    (type (;11;) (option s32))
    (type (;12;) (option s64))
    (type (;13;) (record (field "topic" 10) (field "partition" 11) (field "timestamp-ms" 12) (field "key" 1) (field "value" 1) (field "headers" 4)))
    (import "import-type-output-record" (type (;14;) (eq 13)))
    (type (;15;) (list 14))
    (type (;16;) (variant (case "keep") (case "drop") (case "replace" 15) (case "reject" string)))
    (import "import-type-outcome" (type (;17;) (eq 16)))
    (type (;18;) (variant (case "invalid-config" string) (case "unsupported" string) (case "failed" string)))
    (import "import-type-plugin-error" (type (;19;) (eq 18)))
    (type (;20;) (list 17))
    (type (;21;) (result 20 (error 19)))
    (type (;22;) (func (param "batch" 9) (result 21)))
    (import "import-func-transform" (func (;0;) (type 22)))
    (export (;23;) "record-batch" (type 9))
    (export (;24;) "outcome" (type 17))
    (export (;25;) "plugin-error" (type 19))
    (type (;26;) (list 24))
    (type (;27;) (result 26 (error 25)))
    (type (;28;) (func (param "batch" 23) (result 27)))
    (export (;1;) "transform" (func 0) (func (type 28)))
  )
  (instance $record-transform (instantiate $transform-shim
    (with "import-func-transform" (func $transform))
    (with "import-type-header" (type $header))
    (with "import-type-kafka-record" (type $kafka-record))
    (with "import-type-record-batch" (type $record-batch))
    (with "import-type-output-record" (type $output-record))
    (with "import-type-outcome" (type $outcome))
    (with "import-type-plugin-error" (type $plugin-error))))
  (export "refract:plugin/record-transform@0.1.0" (instance $record-transform))
)

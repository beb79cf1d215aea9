package main

// Hand-written canonical ABI glue for the `policy-plugin` world of the refract checkout's
// wit/plugin.wit (refract:plugin@0.1.0). Standard Go (1.24+) builds this with GOOS=wasip1
// GOARCH=wasm -buildmode=c-shared: every `//go:wasmexport` below is a core export whose name and
// flat signature are exactly what `wasm-tools component new` expects for the WIT function, and
// `hostLog` is the core import of `refract:plugin/host.log`.
//
// The policy itself is in the package's other file (policy.go), which defines what this file
// calls: pluginName, pluginVersion, initPolicy, `current` and its methods (formatRemoteTopic,
// topicSource, upstreamTopic, isInternalTopic, heartbeatsTopic, offsetSyncsTopic,
// checkpointsTopic). This file holds the types it lifts and lowers (option, pluginError) and two
// helpers for config errors (invalid, tomlType). Changing the policy needs no change here.
//
// Canonical ABI facts used here (wasm32): a string is (ptr, len) of UTF-8; a list<T> is
// (ptr, count) of elements laid out back to back; a function whose results flatten to more than
// one value returns a pointer to a "return area" in linear memory, and the host then calls the
// matching `cabi_post_<name>` export with that pointer once it has copied the results out.
//
// Memory and the Go runtime:
//   - The host writes arguments into memory it gets from `cabi_realloc`. Those buffers are Go
//     allocations, kept reachable in argBufs until the export has turned them into Go values.
//   - Results are Go allocations kept reachable in retBufs/retStrings until the post-return.
//   - Wasmtime runs `cabi_realloc` and post-return with the "may leave" flag cleared: any call to
//     an import (WASI included) traps. Go's garbage collector calls WASI (clock_time_get) when a
//     cycle starts, and a cycle may start inside any allocation. So automatic GC is off except
//     while an export body runs: enter() turns it on, leave() turns it off again and waits for a
//     running mark phase to end, so no GC work is pending when cabi_realloc next allocates.
//   - The WASI preview1 adapter that `component new` links in (for the Go runtime's own WASI
//     calls) allocates its state and its stack on the first WASI call, which the Go runtime makes
//     during `_initialize`, on its system stack. Handing it Go's cabi_realloc there kills the
//     runtime ("badsystemstack"), and wit-component's fallback (memory.grow) would hand it pages
//     that Go's allocator also believes are its own. So the module exports
//     `cabi_realloc_adapter`, which wit-component gives the adapter instead: a bump allocator
//     over a static array that needs no runtime and is never freed.
//   - wit-component runs `_initialize` (the Go runtime and package inits) when the component is
//     instantiated, before the host calls any export.

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"unsafe"
)

func init() {
	debug.SetGCPercent(-1) // see leave()
	runtime.MemProfileRate = 0
}

// gcPercent is the GOGC value in force while an export body runs.
const gcPercent = 100

func enter() { debug.SetGCPercent(gcPercent) }

func leave() {
	releaseArgs()
	debug.SetGCPercent(-1) // also waits for a GC mark phase in progress to finish
}

// ---- the adapter's memory ----------------------------------------------------------------

// adapterArena holds the WASI adapter's state and its stack: with
// wasi-preview1-component-adapter-provider 48.0.8 it asks once for each, 64 KiB 8-aligned.
// It is zero-initialised linear memory (BSS), so it does not add to the size of the .wasm.
var adapterArena [(128<<10 + 4<<10) / 8]uint64
var adapterUsed uintptr

//go:wasmexport cabi_realloc_adapter
//go:nosplit
func cabiReallocAdapter(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	if old != nil || align == 0 || align&(align-1) != 0 {
		return nil // the adapter never reallocates; a null result makes it trap
	}
	base := uintptr(unsafe.Pointer(&adapterArena[0]))
	start := (base + adapterUsed + uintptr(align) - 1) &^ (uintptr(align) - 1)
	end := start + uintptr(newSize)
	if end > base+unsafe.Sizeof(adapterArena) {
		return nil
	}
	adapterUsed = end - base
	return unsafe.Add(unsafe.Pointer(&adapterArena[0]), start-base)
}

// ---- memory for arguments ------------------------------------------------------------------

var argBufs [][]uint64
var emptyBuf uint64

// cabi_realloc is how the host gets memory for an export's arguments. Buffers are []uint64, so
// they are 8-aligned, the largest alignment the canonical ABI asks for.
//
//go:wasmexport cabi_realloc
func cabiRealloc(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	if align > 8 {
		panic("cabi_realloc: alignment above 8")
	}
	if newSize == 0 {
		return unsafe.Pointer(&emptyBuf)
	}
	buf := make([]uint64, (newSize+7)/8)
	argBufs = append(argBufs, buf)
	p := unsafe.Pointer(&buf[0])
	if old != nil && oldSize > 0 {
		copy(unsafe.Slice((*byte)(p), newSize), unsafe.Slice((*byte)(old), min(oldSize, newSize)))
	}
	return p
}

// releaseArgs drops the references to the argument buffers. Strings made by liftString still
// point into them, which keeps those buffers alive for as long as the strings are used.
func releaseArgs() {
	clear(argBufs)
	argBufs = argBufs[:0]
}

func ptr(addr uint32) unsafe.Pointer {
	// Every address the host passes is one cabi_realloc returned, inside a live Go allocation.
	return unsafe.Add(unsafe.Pointer(nil), uintptr(addr))
}

func addr(p unsafe.Pointer) uint32 { return uint32(uintptr(p)) }

func load32(p unsafe.Pointer, off uintptr) uint32 { return *(*uint32)(unsafe.Add(p, off)) }

func store32(p unsafe.Pointer, off uintptr, v uint32) { *(*uint32)(unsafe.Add(p, off)) = v }

func liftString(p, n uint32) string {
	if n == 0 {
		return ""
	}
	return unsafe.String((*byte)(ptr(p)), n)
}

func liftStrings(p, n uint32) []string {
	out := make([]string, n)
	base := ptr(p)
	for i := range out {
		off := uintptr(i) * 8
		out[i] = liftString(load32(base, off), load32(base, off+4))
	}
	return out
}

// ---- memory for results --------------------------------------------------------------------

var retBufs [][]uint32
var retBytes [][]byte
var retStrings []string

func retArea(words int) unsafe.Pointer {
	buf := make([]uint32, words)
	retBufs = append(retBufs, buf)
	return unsafe.Pointer(&buf[0])
}

// storeString writes a string's (ptr, len) at p+off and keeps its bytes alive until post-return.
func storeString(p unsafe.Pointer, off uintptr, s string) {
	if len(s) > 0 {
		retStrings = append(retStrings, s)
	}
	store32(p, off, addr(unsafe.Pointer(unsafe.StringData(s))))
	store32(p, off+4, uint32(len(s)))
}

func lowerStrings(ss []string) (uint32, uint32) {
	if len(ss) == 0 {
		return 0, 0
	}
	p := retArea(2 * len(ss))
	for i, s := range ss {
		storeString(p, uintptr(i)*8, s)
	}
	return addr(p), uint32(len(ss))
}

// option<string>: discriminant byte at 0, string at 4; 12 bytes, 4-aligned.
func lowerOptionStrings(os []option) (uint32, uint32) {
	if len(os) == 0 {
		return 0, 0
	}
	p := retArea(3 * len(os))
	for i, o := range os {
		off := uintptr(i) * 12
		if o.some {
			store32(p, off, 1)
			storeString(p, off+4, o.value)
		}
	}
	return addr(p), uint32(len(os))
}

func lowerBools(bs []bool) (uint32, uint32) {
	if len(bs) == 0 {
		return 0, 0
	}
	buf := make([]byte, len(bs))
	for i, b := range bs {
		if b {
			buf[i] = 1
		}
	}
	retBytes = append(retBytes, buf)
	return addr(unsafe.Pointer(&buf[0])), uint32(len(bs))
}

// postReturn frees what the last export returned.
func postReturn() {
	clear(retBufs)
	retBufs = retBufs[:0]
	clear(retBytes)
	retBytes = retBytes[:0]
	clear(retStrings)
	retStrings = retStrings[:0]
}

// result<T, plugin-error>: discriminant byte at 0, payload at 4 (ok: T's flat words; err: the
// plugin-error's discriminant byte at 4 and its string at 8); 16 bytes.
func lowerResult(okPtr, okLen uint32, err *pluginError) uint32 {
	p := retArea(4)
	if err != nil {
		store32(p, 0, 1)
		store32(p, 4, uint32(err.kind))
		storeString(p, 8, err.message)
	} else {
		store32(p, 4, okPtr)
		store32(p, 8, okLen)
	}
	return addr(p)
}

func lowerSingleString(s string) uint32 {
	p := retArea(2)
	storeString(p, 0, s)
	return addr(p)
}

// ---- the host import -----------------------------------------------------------------------

//go:wasmimport refract:plugin/host@0.1.0 log
//go:noescape
func hostLog(level uint32, msg unsafe.Pointer, msgLen uint32)

type logLevel uint32

const (
	levelTrace logLevel = iota
	levelDebug
	levelInfo
	levelWarn
	levelError
)

// log writes a line to the host's log. Only call it from an export body.
func log(level logLevel, msg string) {
	hostLog(uint32(level), unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	runtime.KeepAlive(msg)
}

// ---- exports: refract:plugin/lifecycle@0.1.0 ---------------------------------------------

//go:wasmexport refract:plugin/lifecycle@0.1.0#info
func exportInfo() uint32 {
	enter()
	defer leave()
	p := retArea(4)
	storeString(p, 0, pluginName)
	storeString(p, 8, pluginVersion)
	return addr(p)
}

//go:wasmexport cabi_post_refract:plugin/lifecycle@0.1.0#info
func postInfo(uint32) { postReturn() }

//go:wasmexport refract:plugin/lifecycle@0.1.0#init
func exportInit(configPtr, configLen uint32) uint32 {
	enter()
	defer leave()
	return lowerResult(0, 0, initPolicy(liftString(configPtr, configLen)))
}

//go:wasmexport cabi_post_refract:plugin/lifecycle@0.1.0#init
func postInit(uint32) { postReturn() }

// ---- exports: refract:plugin/replication-policy@0.1.0 ------------------------------------

//go:wasmexport refract:plugin/replication-policy@0.1.0#format-remote-topics
func exportFormatRemoteTopics(srcPtr, srcLen, topicsPtr, topicsLen uint32) uint32 {
	enter()
	defer leave()
	src := liftString(srcPtr, srcLen)
	topics := liftStrings(topicsPtr, topicsLen)
	out := make([]string, len(topics))
	for i, t := range topics {
		out[i] = current.formatRemoteTopic(src, t)
	}
	p, n := lowerStrings(out)
	return lowerResult(p, n, nil)
}

//go:wasmexport cabi_post_refract:plugin/replication-policy@0.1.0#format-remote-topics
func postFormatRemoteTopics(uint32) { postReturn() }

//go:wasmexport refract:plugin/replication-policy@0.1.0#topic-sources
func exportTopicSources(topicsPtr, topicsLen uint32) uint32 {
	enter()
	defer leave()
	topics := liftStrings(topicsPtr, topicsLen)
	out := make([]option, len(topics))
	for i, t := range topics {
		out[i] = current.topicSource(t)
	}
	p, n := lowerOptionStrings(out)
	return lowerResult(p, n, nil)
}

//go:wasmexport cabi_post_refract:plugin/replication-policy@0.1.0#topic-sources
func postTopicSources(uint32) { postReturn() }

//go:wasmexport refract:plugin/replication-policy@0.1.0#upstream-topics
func exportUpstreamTopics(topicsPtr, topicsLen uint32) uint32 {
	enter()
	defer leave()
	topics := liftStrings(topicsPtr, topicsLen)
	out := make([]option, len(topics))
	for i, t := range topics {
		out[i] = current.upstreamTopic(t)
	}
	p, n := lowerOptionStrings(out)
	return lowerResult(p, n, nil)
}

//go:wasmexport cabi_post_refract:plugin/replication-policy@0.1.0#upstream-topics
func postUpstreamTopics(uint32) { postReturn() }

//go:wasmexport refract:plugin/replication-policy@0.1.0#is-internal-topics
func exportIsInternalTopics(topicsPtr, topicsLen uint32) uint32 {
	enter()
	defer leave()
	topics := liftStrings(topicsPtr, topicsLen)
	out := make([]bool, len(topics))
	for i, t := range topics {
		out[i] = current.isInternalTopic(t)
	}
	p, n := lowerBools(out)
	return lowerResult(p, n, nil)
}

//go:wasmexport cabi_post_refract:plugin/replication-policy@0.1.0#is-internal-topics
func postIsInternalTopics(uint32) { postReturn() }

//go:wasmexport refract:plugin/replication-policy@0.1.0#heartbeats-topic
func exportHeartbeatsTopic() uint32 {
	enter()
	defer leave()
	return lowerSingleString(current.heartbeatsTopic())
}

//go:wasmexport cabi_post_refract:plugin/replication-policy@0.1.0#heartbeats-topic
func postHeartbeatsTopic(uint32) { postReturn() }

//go:wasmexport refract:plugin/replication-policy@0.1.0#offset-syncs-topic
func exportOffsetSyncsTopic(aliasPtr, aliasLen uint32) uint32 {
	enter()
	defer leave()
	return lowerSingleString(current.offsetSyncsTopic(liftString(aliasPtr, aliasLen)))
}

//go:wasmexport cabi_post_refract:plugin/replication-policy@0.1.0#offset-syncs-topic
func postOffsetSyncsTopic(uint32) { postReturn() }

//go:wasmexport refract:plugin/replication-policy@0.1.0#checkpoints-topic
func exportCheckpointsTopic(aliasPtr, aliasLen uint32) uint32 {
	enter()
	defer leave()
	return lowerSingleString(current.checkpointsTopic(liftString(aliasPtr, aliasLen)))
}

//go:wasmexport cabi_post_refract:plugin/replication-policy@0.1.0#checkpoints-topic
func postCheckpointsTopic(uint32) { postReturn() }

// main is never run in a -buildmode=c-shared module; `_initialize` runs the package inits.
func main() {}

// ---- the types this file lifts and lowers, and config-error helpers ---------------------------

// option is WIT's option<string>.
type option struct {
	some  bool
	value string
}

func some(s string) option { return option{true, s} }

// errorKind is a case of refract:plugin/types.plugin-error, in WIT order.
type errorKind uint32

const (
	invalidConfig errorKind = iota
	unsupported
	failed
)

type pluginError struct {
	kind    errorKind
	message string
}

// invalid is an invalid-config error with a formatted message.
func invalid(format string, args ...any) *pluginError {
	return &pluginError{invalidConfig, fmt.Sprintf(format, args...)}
}

// tomlType names a decoded TOML value's type the way the Rust SDK's messages do.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any, []map[string]any:
		return "array"
	case map[string]any:
		return "table"
	default:
		return "datetime"
	}
}

// Package template renders a checkpoint's own Jinja chat template
// (tokenizer.chat_template in tokenizer_config.json or GGUF metadata)
// exactly as Hugging Face transformers' apply_chat_template(...,
// tokenize=False) does, and reads Hermes-style tool calls back out of the
// model's text. It owns the Jinja interpreter, the conversation's
// template view, and the Hermes tool-call conventions.
//
// # Rendering
//
// Parse compiles a template once; Render (safe for concurrent use) turns a
// Conversation into the prompt text. The environment is transformers':
// jinja2's ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, loop controls (break, continue), the {% generation %}
// tag, raise_exception, strftime_now, and tojson as json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False). The
// template sees messages, tools (None when none are offered),
// documents=None, add_generation_prompt, bos_token, eos_token and the
// Conversation's Kwargs. A tool call's arguments reach the template as a
// mapping when they are a JSON object (vLLM's convention; templates do
// `arguments | tojson`), else as the text.
//
// Values follow Python: str() and repr() of lists, dicts, floats (shortest
// round-trip digits, 1e+16 style exponents), None and booleans; ints, true
// division, floor division and modulo; string indexing by code point;
// Undefined that prints empty but fails on attribute access, calls and
// arithmetic; dicts that keep insertion order (tool JSON keeps its key
// order). The sandbox's refusals are kept: list.append, dict.update and
// other mutating methods, underscore namespace attributes, range() over
// 100,000 items.
//
// # Why an interpreter of our own
//
// github.com/ardanlabs/jinja v1.8.0, the Go Jinja served here, was
// examined first. It cannot bound a render (no step budget: nested loops
// run unchecked, and a recursive macro overflows the goroutine stack, a
// fatal error no recover catches), and its output differs from
// transformers' where chat templates look: tojson(indent=...) goes through
// Go's encoding/json (keys sorted, < > & escaped), floats print with %g
// (1e+06 where Python writes 1000000.0), Go maps given to it are
// key-sorted, and unknown characters in expressions are skipped silently.
// Those are not fixable from outside the library. This package implements
// the subset of Jinja that chat templates use, every step checked against
// transformers by the parity test (TestPythonParity; its recorded renders
// in testdata/reference.json are checked by TestReferenceRenders on every
// run).
//
// # Limits
//
// A template is untrusted input. Every render is bounded by Limits: steps
// (nodes, expressions, iterations and the size of values built), output
// and value size, and macro call depth; Parse bounds nesting depth. A
// render also stops when its context is done. Both are fuzzed
// (FuzzParseRender).
//
// # Not supported
//
// Rejected with ErrUnsupported or ErrSyntax: include, extends, import,
// block, call blocks, recursive loops, *args/**kwargs in calls, extended
// slices, str.format specs ({:>10}), and filters chat templates do not use
// (batch, slice, groupby, truncate, striptags, wordwrap, urlencode,
// pprint, random, xmlattr, filesizeformat). Known differences: integers
// are 64-bit (overflow is ErrUnsupported where Python would grow); JSON
// integers beyond int64 become floats; reverse, map, select, reject,
// selectattr, rejectattr and unique return lists where jinja2 returns
// iterators (only printing one directly differs, which shows a memory
// address in Python); loop.depth is always 1; str.upper and friends use Go's
// Unicode case mapping (no 'ß' → 'SS'); macros do not see caller, varargs
// or kwargs.
//
// # Tool calls
//
// ParseToolCalls extracts <tool_call>{"name": ..., "arguments": {...}}
// </tool_call> blocks from a model's answer into OpenAI tool calls.
// For a model whose template ignores tools (Template.UsesTools,
// Template.HandlesToolCalls), ApplyHermesTools rewrites the conversation
// the Hermes way: tools as JSON in <tools></tools> in the system prompt
// with the instruction to answer in <tool_call> blocks, past calls as
// <tool_call> blocks, results as <tool_response> blocks. With a ChatML
// template the result is byte-identical to what Qwen2.5's tools-aware
// template renders.
package template

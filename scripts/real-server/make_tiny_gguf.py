#!/usr/bin/env python3
"""Write a tiny random-weight LLaMA model in GGUF format.

The model is only good for exercising a real inference server's wire format:
its output is gibberish. It uses a SentencePiece-style ("llama") vocabulary
with <unk>, <s>, </s>, the ChatML control tokens, all 256 byte-fallback
tokens and a few hundred ordinary pieces, so llama.cpp can tokenize any text.

Usage: make_tiny_gguf.py [--tools-template] OUTPUT.gguf
Needs the `gguf` and `numpy` Python packages.

By default the chat template is plain ChatML (messages only). With
`--tools-template` it is Qwen2.5's ChatML with tools: the tools listed in the
system turn, calls as <tool_call>{"name": ..., "arguments": ...}</tool_call>
(on one line, where Qwen puts newlines inside the tags),
results as <tool_response>. llama.cpp's `llama-server --jinja` needs a
template that renders tools to know the model's tool-call format (newer
builds find it by analysing the template; with plain ChatML they ignore the
tools). The tools variant also adds the four tool tags to the vocabulary
(as Qwen2.5 does) and turns off the SentencePiece space prefix (see below),
so its weights differ; the default model is unchanged.
"""

import string
import sys

import numpy as np
import gguf

N_VOCAB_WORDS = [
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "is", "it", "be",
    "you", "I", "we", "they", "he", "she", "this", "that", "with", "for",
    "hello", "world", "weather", "city", "Paris", "London", "sunny", "rain",
    "get", "call", "tool", "function", "name", "arguments", "user",
    "assistant", "system", "yes", "no", "ok", "today", "tomorrow", "what",
    "how", "why", "where", "when", "good", "bad", "cold", "hot", "warm",
]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Qwen2.5's chat template (tools in the system turn, Hermes-style calls),
# except that a call is <tool_call>{...}</tool_call> on one line: Qwen's
# "<tool_call>\n" would make llama-server wait for a newline token after
# the tag before it applies its grammar, which a random model rarely writes.
CHATML_TOOLS_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

TOOL_TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def build_vocab():
    tokens, scores, types = [], [], []

    def add(piece, score, ttype):
        tokens.append(piece)
        scores.append(score)
        types.append(ttype)

    add("<unk>", 0.0, gguf.TokenType.UNKNOWN)
    add("<s>", 0.0, gguf.TokenType.CONTROL)
    add("</s>", 0.0, gguf.TokenType.CONTROL)
    add("<|im_start|>", 0.0, gguf.TokenType.CONTROL)
    add("<|im_end|>", 0.0, gguf.TokenType.CONTROL)
    for b in range(256):
        add("<0x%02X>" % b, 0.0, gguf.TokenType.BYTE)

    seen = set(tokens)
    normal = ["\u2581"]
    chars = string.ascii_letters + string.digits + string.punctuation
    normal += list(chars)
    normal += ["\u2581" + c for c in chars]
    normal += ["\u2581" + w for w in N_VOCAB_WORDS]
    normal += N_VOCAB_WORDS
    score = -1.0
    for piece in normal:
        if piece in seen:
            continue
        seen.add(piece)
        # Longer pieces get higher scores so SentencePiece-style merging
        # prefers whole words over single characters.
        add(piece, score + len(piece), gguf.TokenType.NORMAL)
        score -= 0.001
    return tokens, scores, types


def main():
    args = sys.argv[1:]
    tools_template = "--tools-template" in args
    args = [a for a in args if a != "--tools-template"]
    if len(args) != 1:
        sys.exit("usage: make_tiny_gguf.py [--tools-template] OUTPUT.gguf")
    out = args[0]

    n_embd = 64
    n_head = 4
    n_head_kv = 4
    head_dim = n_embd // n_head
    n_layer = 2
    n_ff = 128
    n_ctx = 2048

    tokens, scores, types = build_vocab()
    if tools_template:
        # As in Qwen2.5: the tool tags are added tokens (rendered as text),
        # so the random model can open a call in one step; character by
        # character it never would.
        for tag in TOOL_TAGS:
            tokens.append(tag)
            scores.append(0.0)
            types.append(gguf.TokenType.USER_DEFINED)
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(out, "llama")
    w.add_name("tiny-random-llama")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)

    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    if tools_template:
        w.add_chat_template(CHATML_TOOLS_TEMPLATE)
        # No SentencePiece space before the text that follows a special
        # token: llama-server feeds the generation prompt
        # "<|im_start|>assistant\n" to its tool-call grammar, which expects
        # "assistant", not " assistant".
        w.add_add_space_prefix(False)
    else:
        w.add_chat_template(CHATML_TEMPLATE)

    rng = np.random.default_rng(1234)

    def rand(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # numpy shapes are (rows, cols) = reversed ggml ne.
    w.add_tensor("token_embd.weight", rand(n_vocab, n_embd))
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor("output.weight", rand(n_vocab, n_embd, scale=0.5))
    for i in range(n_layer):
        p = "blk.%d." % i
        w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(p + "attn_q.weight", rand(n_embd, n_embd))
        w.add_tensor(p + "attn_k.weight", rand(head_dim * n_head_kv, n_embd))
        w.add_tensor(p + "attn_v.weight", rand(head_dim * n_head_kv, n_embd))
        w.add_tensor(p + "attn_output.weight", rand(n_embd, n_embd))
        w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", rand(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", rand(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", rand(n_embd, n_ff))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote %s (vocab %d, %d layers, hidden %d)" % (out, n_vocab, n_layer, n_embd))


if __name__ == "__main__":
    main()

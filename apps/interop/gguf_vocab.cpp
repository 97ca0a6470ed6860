// The tokenizer.* keys of a GGUF export (gguf::add_tokenizer): ember's byte-level BPE as
// llama.cpp's "gpt2" tokenizer model with the "gpt-2" pre-tokenizer (the same split pattern,
// docs/formats.md#tokenizer-tokenizerjson-gpt-2-files), tokens as byte-level strings, merges
// by rank, the special tokens as control tokens and ChatML's template when the tokenizer has it.
#include "apps/interop/gguf_export.h"
#include "apps/interop/gguf_writer.h"
#include "core/error.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/tokenizer.h"

namespace ember::apps::gguf {
namespace {

// llama.cpp's token types.
enum : int32_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5 };

// The conversation rendering of docs/formats.md#chat-data-jsonl, as a Jinja template.
constexpr const char* kChatMlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

void check_splits_like_llama_cpp(const data::Tokenizer& t) {
  const char* what = t.add_prefix_space()            ? "add_prefix_space"
                     : t.model().options().ignore_merges ? "ignore_merges"
                     : t.model().options().unk           ? "an unk_token"
                     : !t.model().has_all_bytes()        ? "tokens missing for some bytes"
                                                         : nullptr;
  EMBER_CHECK(!what, "export --format gguf: the tokenizer has ", what, ", which llama.cpp's GPT-2 "
              "byte-level BPE does not apply; it would split text differently");
}

}  // namespace

void add_tokenizer(Writer& w, const data::Tokenizer& t, int64_t vocab_size) {
  check_splits_like_llama_cpp(t);
  const int64_t n_tok = static_cast<int64_t>(t.vocab_size());
  std::vector<std::string> tokens(vocab_size);
  std::vector<int32_t> types(vocab_size, kNormal);
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (id >= n_tok) {  // rows of the embedding past the tokenizer's ids (never produced)
      tokens[id] = "[PAD" + std::to_string(id) + "]";
      types[id] = kUnused;
    } else {
      tokens[id] = data::byte_level_encode(t.model().token_bytes(static_cast<uint32_t>(id)));
    }
  }
  for (const data::SpecialToken& s : t.special_tokens()) {
    tokens[s.id] = s.content;
    types[s.id] = s.special ? kControl : kUserDefined;
  }
  std::vector<std::string> merges;
  merges.reserve(t.model().merges().size());
  for (const data::BpeMerge& m : t.model().merges()) {
    merges.push_back(data::byte_level_encode(t.model().token_bytes(m.left)) + " " +
                     data::byte_level_encode(t.model().token_bytes(m.right)));
  }
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "gpt-2");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", merges);
  if (const auto eot = t.find_special(data::kEndOfText)) {
    w.add_u32("tokenizer.ggml.bos_token_id", *eot);
    w.add_u32("tokenizer.ggml.eos_token_id", *eot);
    w.add_u32("tokenizer.ggml.padding_token_id", *eot);
  }
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_bool("tokenizer.ggml.add_eos_token", false);
  const auto im_start = t.find_special(data::kImStart), im_end = t.find_special(data::kImEnd);
  if (im_start && im_end) {
    w.add_u32("tokenizer.ggml.eot_token_id", *im_end);
    w.add_string("tokenizer.chat_template", kChatMlTemplate);
  }
}

}  // namespace ember::apps::gguf

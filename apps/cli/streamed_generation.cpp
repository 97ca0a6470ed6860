// One generation streamed to stdout for `ember generate` and `ember chat`:
// sampling options, the ChatML-token check, UTF-8-safe streaming (on a terminal:
// invalid bytes replaced, controls escaped, no special token's name) and the
// speed line on stderr.
#include "apps/cli/streamed_generation.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "apps/cli/terminal_text.h"
#include "apps/cli/weights_option.h"
#include "apps/common/utf8_text.h"
#include "core/error.h"
#include "data/tokenizer/tokenizer.h"
#include "inference/model_runner/paged_forward.h"

namespace ember::apps {
namespace {

// Prints token bytes as they come, whole UTF-8 characters only (an unfinished one is
// held, as serve holds it); on a terminal as terminal_text shows them, elsewhere unchanged.
class TextOut {
 public:
  explicit TextOut(bool terminal) : terminal_(terminal) {}
  void write(std::string_view bytes) { put(utf8_.push(bytes)); }
  void flush() { put(utf8_.finish()); }

 private:
  void put(const std::string& text) {
    const std::string shown = terminal_ ? terminal_text(text) : text;
    std::fwrite(shown.data(), 1, shown.size(), stdout);
    std::fflush(stdout);
  }

  Utf8Assembler utf8_;
  bool terminal_;
};

inference::SamplingOptions sampling_options(const SamplingFlags& f, uint64_t seed) {
  inference::SamplingOptions s;
  s.max_tokens = f.max_tokens;
  s.temperature = f.temperature;
  s.top_k = f.top_k;
  s.top_p = f.top_p;
  s.repetition_penalty = f.repetition_penalty;
  s.seed = seed;
  return s;
}

// ended_by: the token that ended a chat reply other than the stop token (<|endoftext|>, <|im_start|>).
void print_speed(const inference::GenerationResult& r, int64_t max_seq_len, bool chat, std::string_view ended_by) {
  std::string why = inference::describe(r.stop_reason, max_seq_len);
  if (chat && r.stop_reason == inference::StopReason::StopToken) why = "reached the <|im_end|> token";
  if (chat && r.stop_reason == inference::StopReason::Callback) why = "reached the " + std::string(ended_by) + " token";
  std::fprintf(stderr, "[%s; prompt %lld tokens, prefill %.0f tokens/s; %lld tokens, decode %.1f tokens/s]\n",
               why.c_str(), static_cast<long long>(r.prompt_tokens), r.prefill_tokens_per_second(),
               static_cast<long long>(r.tokens.size()), r.decode_tokens_per_second());
}

// The added token `id` of tokenizer.json (special or not); nullptr for an ordinary token.
const data::SpecialToken* added_token(const data::Tokenizer& tok, uint32_t id) {
  for (const data::SpecialToken& sp : tok.special_tokens()) {
    if (sp.id == id) return &sp;
  }
  return nullptr;
}

}  // namespace

namespace {

// The inference form of lm's model in `weights`, converted on the first call and reused by the
// next ones on the same model (each turn of `ember chat`).
std::shared_ptr<const inference::InferenceModel> inference_model(const LoadedModel& lm,
                                                                 const std::string& weights) {
  static std::shared_ptr<const inference::InferenceModel> cached;
  static const nn::Transformer* cached_for = nullptr;
  const kernels::WeightType type = kernels::weight_type_named(weights);
  if (!cached || cached_for != lm.model.get() || cached->weight_type() != type) {
    cached = std::make_shared<const inference::InferenceModel>(*lm.model, type);
    cached_for = lm.model.get();
  }
  return cached;
}

}  // namespace

void add_sampling_options(CLI::App* sub, SamplingFlags& f, const std::string& seed_help) {
  sub->add_option("--max-tokens", f.max_tokens, "tokens to generate at most")->capture_default_str();
  sub->add_option("--temperature", f.temperature, "softmax temperature (0: greedy)")->capture_default_str();
  sub->add_option("--top-k", f.top_k, "keep the k most likely tokens (0: all)")->capture_default_str();
  sub->add_option("--top-p", f.top_p, "keep the smallest set of tokens with this much probability (1: all)")
      ->capture_default_str();
  sub->add_option("--repetition-penalty", f.repetition_penalty, "divide the logits of tokens already seen (1: off)")
      ->capture_default_str();
  sub->add_option("--seed", f.seed, seed_help)->capture_default_str();
  sub->add_option("--kv-cache-dtype", f.kv_cache_dtype,
                  "the KV cache's type: float32, or bfloat16 (keys and values rounded; as ember serve's)")
      ->check(CLI::IsMember({"float32", "bfloat16"}))
      ->capture_default_str();
  add_weights_option(sub, f.weights);
}

void check_sampling_flags(const SamplingFlags& f) {
  EMBER_CHECK(f.max_tokens >= 0, "--max-tokens must be >= 0, got ", f.max_tokens);
  inference::check_sampling_options(sampling_options(f, f.seed));  // before the model loads or a prompt echoes
}

void require_chat_tokens(const data::Tokenizer& tokenizer, const std::string& checkpoint) {
  const bool start = tokenizer.find_special(data::kImStart).has_value();
  const bool end = tokenizer.find_special(data::kImEnd).has_value();
  EMBER_CHECK(start && end, checkpoint, ": its tokenizer has no ",
              !start && !end ? "<|im_start|> or <|im_end|>" : !start ? "<|im_start|>" : "<|im_end|>",
              " special token, which ChatML needs: add them with `ember finetune --base ", checkpoint,
              " --add-chat-tokens ...` (new embedding rows, trained with the adapters)");
}

StreamedText stream_generation(const LoadedModel& lm, const std::vector<int64_t>& ids, const SamplingFlags& f,
                               uint64_t seed, bool chat, std::string_view echo) {
  const data::Tokenizer& tok = lm.tokenizer;
  const std::optional<uint32_t> eot = tok.find_special(data::kEndOfText);
  inference::SamplingOptions s = sampling_options(f, seed);
  s.vocab_limit = static_cast<int64_t>(tok.vocab_size());  // a preset's vocab may be larger
  if (chat) {
    s.stop_token = tok.special_id(data::kImEnd);
  } else {
    s.stop_token = eot ? static_cast<int64_t>(*eot) : -1;
  }
  // A chat reply also ends where ChatML would start another message (as serve's chat does).
  const std::vector<std::string_view> reply_ends = {data::kEndOfText, data::kImStart};
  inference::check_fresh_prompt(lm.model->config(), ids);  // before the echo: a refused prompt prints nothing
  const bool terminal = isatty(fileno(stdout));
  TextOut out(terminal);
  out.write(echo);
  StreamedText streamed;
  std::string_view ended_by;
  streamed.result = inference::generate(inference_model(lm, f.weights), ids, s, [&](int64_t t) {
    const uint32_t u = static_cast<uint32_t>(t);  // below the tokenizer's size (vocab_limit)
    const data::SpecialToken* added = added_token(tok, u);
    if (chat && added && std::find(reply_ends.begin(), reply_ends.end(), added->content) != reply_ends.end()) {
      ended_by = added->content;
      return false;
    }
    const std::string bytes = tok.decode(std::span<const uint32_t>(&u, 1));
    streamed.text += bytes;
    if (!terminal || !added || !added->special) out.write(bytes);  // a terminal shows no special token's name
    return true;
  }, inference::kv_cache_dtype_named(f.kv_cache_dtype));
  out.flush();
  std::printf("\n");
  std::fflush(stdout);
  print_speed(streamed.result, lm.model->config().max_seq_len, chat, ended_by);
  return streamed;
}

}  // namespace ember::apps

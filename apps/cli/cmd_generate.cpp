// `ember generate`: sampling from a checkpoint with a KV cache, streaming the
// text to stdout as it is produced; prefill and decode speed go to stderr.
// --interactive reads prompts line by line from the terminal. --chat renders
// the prompt as a ChatML user message (after an optional --system message),
// prints only the assistant's reply and stops at <|im_end|>.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "apps/cli/commands.h"
#include "apps/train/model_io.h"
#include "core/io/read_file.h"
#include "data/chat.h"
#include "nn/generate.h"

namespace ember::apps {
namespace {

struct GenerateOptions {
  std::string checkpoint, prompt, prompt_file, tokenizer, system;
  int64_t max_tokens = 256, top_k = 0, num_samples = 1;
  double temperature = 1.0, top_p = 1.0, repetition_penalty = 1.0;
  uint64_t seed = 0;
  bool interactive = false, chat = false;
};

// The prompt's token ids: its text, or with --chat the ChatML conversation
// (system message, the prompt as the user message) up to "assistant\n".
std::vector<int64_t> prompt_ids(const data::Tokenizer& tok, const std::string& prompt, const GenerateOptions& o) {
  std::vector<uint32_t> ids;
  if (o.chat) {
    std::vector<data::ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", prompt});
    ids = data::chat_generation_prompt(tok, messages);
  } else {
    ids = tok.encode(prompt);
  }
  return std::vector<int64_t>(ids.begin(), ids.end());
}

// Prints token bytes as they come, holding back an incomplete UTF-8 character.
class Utf8Stream {
 public:
  void write(const std::string& bytes) {
    pending_ += bytes;
    size_t keep = 0;  // bytes at the end that start a character not yet complete
    for (size_t back = 1; back <= std::min<size_t>(3, pending_.size()); ++back) {
      const unsigned char c = static_cast<unsigned char>(pending_[pending_.size() - back]);
      if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (need > back) keep = back;
      break;
    }
    std::fwrite(pending_.data(), 1, pending_.size() - keep, stdout);
    std::fflush(stdout);
    pending_.erase(0, pending_.size() - keep);
  }
  void flush() {
    std::fwrite(pending_.data(), 1, pending_.size(), stdout);
    std::fflush(stdout);
    pending_.clear();
  }

 private:
  std::string pending_;
};

void run_one(const LoadedModel& lm, const std::string& prompt, const GenerateOptions& o, uint64_t seed) {
  const data::Tokenizer& tok = lm.tokenizer;
  const std::optional<uint32_t> eot = tok.find_special(data::kEndOfText);
  std::vector<int64_t> ids = prompt_ids(tok, prompt, o);
  if (ids.empty()) ids.push_back(eot ? *eot : static_cast<int64_t>('\n'));  // start a fresh document
  nn::SamplingOptions s;
  s.max_tokens = o.max_tokens;
  s.temperature = o.temperature;
  s.top_k = o.top_k;
  s.top_p = o.top_p;
  s.repetition_penalty = o.repetition_penalty;
  s.seed = seed;
  if (o.chat) {
    s.stop_token = data::chat_specials(tok).im_end;
  } else {
    s.stop_token = eot ? static_cast<int64_t>(*eot) : -1;
  }
  Utf8Stream out;
  if (!o.chat) out.write(prompt);
  const nn::GenerationResult r = nn::generate(*lm.model, ids, s, [&](int64_t t) {
    if (o.chat && eot && t == static_cast<int64_t>(*eot)) return false;  // a reply ends at <|endoftext|> too
    const uint32_t u = static_cast<uint32_t>(t);
    EMBER_CHECK(u < tok.vocab_size(), o.checkpoint, ": the model produced token id ", t, ", outside its tokenizer (",
                tok.vocab_size(), " tokens): the tokenizer is not the one its training data was encoded with; "
                "give that one with --tokenizer FILE");
    out.write(tok.decode(std::span<const uint32_t>(&u, 1)));
    return true;
  });
  out.flush();
  std::printf("\n");
  std::fflush(stdout);
  std::string why = nn::describe(r.stop_reason, lm.model->config().max_seq_len);
  if (o.chat && r.stop_reason == nn::StopReason::StopToken) why = "reached the <|im_end|> token";
  if (o.chat && r.stop_reason == nn::StopReason::Callback) why = "reached the end-of-text token";
  std::fprintf(stderr, "[%s; prompt %lld tokens, prefill %.0f tokens/s; %lld tokens, decode %.1f tokens/s]\n",
               why.c_str(),
               static_cast<long long>(r.prompt_tokens), r.prefill_tokens_per_second(),
               static_cast<long long>(r.tokens.size()), r.decode_tokens_per_second());
}

}  // namespace

CommandRunner add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* sub = app.add_subcommand("generate", "Sample text from a checkpoint (KV cache, streamed to stdout)");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint (.h5)")->required()->check(CLI::ExistingFile);
  auto* p = sub->add_option("--prompt", o->prompt, "text to continue (default: a new document)");
  sub->add_option("--prompt-file", o->prompt_file, "read the prompt from this file")->excludes(p)->check(CLI::ExistingFile);
  sub->add_option("--max-tokens", o->max_tokens, "tokens to generate at most")->capture_default_str();
  sub->add_option("--temperature", o->temperature, "softmax temperature (0: greedy)")->capture_default_str();
  sub->add_option("--top-k", o->top_k, "keep the k most likely tokens (0: all)")->capture_default_str();
  sub->add_option("--top-p", o->top_p, "keep the smallest set of tokens with this much probability (1: all)")->capture_default_str();
  sub->add_option("--repetition-penalty", o->repetition_penalty, "divide the logits of tokens already seen (1: off)")->capture_default_str();
  sub->add_option("--seed", o->seed, "sampling seed (sample i uses seed + i)")->capture_default_str();
  sub->add_option("--num-samples", o->num_samples, "independent samples")->capture_default_str();
  sub->add_flag("--interactive", o->interactive, "read prompts line by line from the terminal");
  sub->add_option("--tokenizer", o->tokenizer, "tokenizer.json to use instead of the checkpoint's")
      ->check(CLI::ExistingFile);
  sub->add_flag("--chat", o->chat,
                "the prompt is a user message: render the conversation with ChatML, print only the reply, "
                "stop at <|im_end|>");
  sub->add_option("--system", o->system, "with --chat: a system message before the user's")->needs("--chat");
  return [o]() {
    EMBER_CHECK(o->num_samples > 0 && o->max_tokens >= 0, "--num-samples must be positive and --max-tokens >= 0");
    LoadedModel lm = load_model(o->checkpoint);
    if (!o->tokenizer.empty()) {
      lm.tokenizer = data::Tokenizer::load(o->tokenizer);
      lm.has_tokenizer = true;
      EMBER_CHECK(static_cast<int64_t>(lm.tokenizer.vocab_size()) <= lm.model->config().vocab_size, "--tokenizer ",
                  o->tokenizer, ": ", lm.tokenizer.vocab_size(), " tokens, more than the model's vocab_size ",
                  lm.model->config().vocab_size, " (not the tokenizer its training data was encoded with)");
    }
    EMBER_CHECK(lm.has_tokenizer, o->checkpoint, ": the checkpoint stores no tokenizer and its vocabulary (",
                lm.model->config().vocab_size,
                " tokens) is not bytes; give --tokenizer FILE (the tokenizer.json its training data was encoded with)");
    if (o->chat) data::chat_specials(lm.tokenizer);  // an Error when <|im_start|> or <|im_end|> is missing
    if (o->interactive) {
      std::string line;
      uint64_t i = 0;
      while (true) {
        if (isatty(fileno(stdin))) std::fprintf(stderr, "> ");
        if (!std::getline(std::cin, line)) break;
        run_one(lm, line, *o, o->seed + i++);
      }
      return 0;
    }
    std::string prompt = o->prompt;
    if (!o->prompt_file.empty()) prompt = read_file(o->prompt_file, "prompt file");
    for (int64_t i = 0; i < o->num_samples; ++i) {
      if (o->num_samples > 1) std::printf("--- sample %lld ---\n", static_cast<long long>(i + 1));
      run_one(lm, prompt, *o, o->seed + static_cast<uint64_t>(i));
    }
    return 0;
  };
}

}  // namespace ember::apps

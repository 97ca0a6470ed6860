// `ember generate`: sampling from a checkpoint with a KV cache, streaming the
// text to stdout as it is produced; prefill and decode speed go to stderr.
// --interactive reads prompts line by line from the terminal. --chat renders
// the prompt as a ChatML user message (after an optional --system message),
// prints only the assistant's reply and stops at <|im_end|>.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "apps/cli/commands.h"
#include "apps/cli/moved_base_option.h"
#include "apps/cli/streamed_generation.h"
#include "apps/common/model_io.h"
#include "core/io/read_file.h"
#include "data/chat.h"

namespace ember::apps {
namespace {

struct GenerateOptions {
  std::string checkpoint, prompt, prompt_file, tokenizer, system, base;
  SamplingFlags sampling;
  int64_t num_samples = 1;
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

void run_one(const LoadedModel& lm, const std::string& prompt, const GenerateOptions& o, uint64_t seed) {
  const std::optional<uint32_t> eot = lm.tokenizer.find_special(data::kEndOfText);
  std::vector<int64_t> ids = prompt_ids(lm.tokenizer, prompt, o);
  if (ids.empty()) ids.push_back(eot ? *eot : static_cast<int64_t>('\n'));  // start a fresh document
  stream_generation(lm, ids, o.sampling, seed, o.chat, o.chat ? std::string_view() : prompt);
}

}  // namespace

CommandRunner add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* sub = app.add_subcommand("generate", "Sample text from a checkpoint (KV cache, streamed to stdout)");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint (.h5)")->required()->check(CLI::ExistingFile);
  add_moved_base_option(*sub, o->base);
  auto* p = sub->add_option("--prompt", o->prompt, "text to continue (default: a new document)");
  sub->add_option("--prompt-file", o->prompt_file, "read the prompt from this file")->excludes(p)->check(CLI::ExistingFile);
  add_sampling_options(sub, o->sampling, "sampling seed (sample i uses seed + i)");
  sub->add_option("--num-samples", o->num_samples, "independent samples")->capture_default_str();
  sub->add_flag("--interactive", o->interactive, "read prompts line by line from the terminal");
  sub->add_option("--tokenizer", o->tokenizer, "tokenizer.json to use instead of the checkpoint's")
      ->check(CLI::ExistingFile);
  sub->add_flag("--chat", o->chat,
                "the prompt is a user message: render the conversation with ChatML, print only the reply, "
                "stop at <|im_end|>");
  sub->add_option("--system", o->system, "with --chat: a system message before the user's")->needs("--chat");
  return [o]() {
    EMBER_CHECK(o->num_samples > 0, "--num-samples must be positive, got ", o->num_samples);
    check_sampling_flags(o->sampling);
    const LoadedModel lm = load_model_for_text(o->checkpoint, o->tokenizer, o->base);
    if (o->chat) require_chat_tokens(lm.tokenizer, o->checkpoint);
    if (o->interactive) {
      std::string line;
      uint64_t i = 0;
      while (true) {
        if (isatty(fileno(stdin))) std::fprintf(stderr, "> ");
        if (!std::getline(std::cin, line)) break;
        run_one(lm, line, *o, o->sampling.seed + i++);
      }
      return 0;
    }
    std::string prompt = o->prompt;
    if (!o->prompt_file.empty()) prompt = read_file(o->prompt_file, "prompt file", kMaxConfigFileBytes);
    for (int64_t i = 0; i < o->num_samples; ++i) {
      if (o->num_samples > 1) std::printf("--- sample %lld ---\n", static_cast<long long>(i + 1));
      run_one(lm, prompt, *o, o->sampling.seed + static_cast<uint64_t>(i));
    }
    return 0;
  };
}

}  // namespace ember::apps

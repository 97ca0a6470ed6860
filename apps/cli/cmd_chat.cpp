// `ember chat`: an interactive multi-turn conversation on stdin/stdout. Each
// line is a user message; the whole conversation so far is rendered with
// ChatML up to "<|im_start|>assistant\n" and the reply generated (KV cache)
// until <|im_end|>, printed and kept. `/reset` clears the conversation, `/exit`
// or end of input ends it. Turns that no longer fit the context are dropped,
// oldest first (the system message stays); a --system message that leaves no
// room for any message is refused at start.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <span>

#include "apps/cli/commands.h"
#include "apps/cli/moved_base_option.h"
#include "apps/cli/streamed_generation.h"
#include "core/error.h"
#include "data/chat.h"

namespace ember::apps {
namespace {

struct ChatOptions {
  std::string checkpoint, system, base;
  SamplingFlags sampling;
};

class Conversation {
 public:
  Conversation(const LoadedModel& lm, const ChatOptions& o) : lm_(lm), o_(o) {}

  // Answers one user message (printing the reply) and keeps the turn.
  void answer(const std::string& user) {
    const int64_t context = lm_.model->config().max_seq_len;
    const size_t alone = render(user, {}).size();
    if (static_cast<int64_t>(alone) >= context) {  // the conversation is left as it was
      std::fprintf(stderr, "[this message needs %zu tokens%s; the model's context holds %lld: not sent]\n", alone,
                   o_.system.empty() ? "" : " with the system message", static_cast<long long>(context));
      return;
    }
    const std::vector<uint32_t> prompt = fit_prompt(user);
    const std::vector<int64_t> ids(prompt.begin(), prompt.end());
    const StreamedText reply =
        stream_generation(lm_, ids, o_.sampling, o_.sampling.seed + replies_++, /*chat=*/true);
    turns_.push_back({"user", user});
    turns_.push_back({"assistant", reply.text});
  }

  void reset() { turns_.clear(); }

  // An Error when --system leaves no room for a message: the system message, a user message
  // of one token and the reply's header fill the context.
  void require_room_for_a_message() const {
    if (o_.system.empty()) return;
    const int64_t context = lm_.model->config().max_seq_len;
    if (static_cast<int64_t>(render("", {}).size()) + 1 < context) return;
    data::ChatLine system;
    system.messages.push_back({"system", o_.system});
    const size_t tokens = data::render_chat(lm_.tokenizer, system).ids.size();
    throw Error("--system: the system message is " + std::to_string(tokens) + " tokens and the model's context holds " +
                std::to_string(context) + ", which leaves no room for a message and its reply; give a shorter one");
  }

 private:
  // The system message, the kept turns and the new user message, then "<|im_start|>assistant\n".
  std::vector<uint32_t> render(const std::string& user, std::span<const data::ChatMessage> turns) const {
    std::vector<data::ChatMessage> messages;
    if (!o_.system.empty()) messages.push_back({"system", o_.system});
    messages.insert(messages.end(), turns.begin(), turns.end());
    messages.push_back({"user", user});
    return data::chat_generation_prompt(lm_.tokenizer, messages);
  }

  // The prompt, after dropping the oldest turns until it leaves room for the
  // reply (--max-tokens, at most half the context); says so once on stderr.
  std::vector<uint32_t> fit_prompt(const std::string& user) {
    const int64_t context = lm_.model->config().max_seq_len;
    const int64_t room = std::clamp<int64_t>(o_.sampling.max_tokens, 1, std::max<int64_t>(1, context / 2));
    std::vector<uint32_t> prompt = render(user, turns_);
    while (static_cast<int64_t>(prompt.size()) + room > context && !turns_.empty()) {
      turns_.erase(turns_.begin(), turns_.begin() + 2);  // one user message and its reply
      prompt = render(user, turns_);
      if (!told_) {
        std::fprintf(stderr, "[the conversation outgrows the model's context of %lld tokens: dropping the oldest "
                     "turns (the system message stays)]\n", static_cast<long long>(context));
        told_ = true;
      }
    }
    return prompt;
  }

  const LoadedModel& lm_;
  const ChatOptions& o_;
  std::vector<data::ChatMessage> turns_;  // user, assistant, user, assistant, ...
  uint64_t replies_ = 0;
  bool told_ = false;
};

}  // namespace

CommandRunner add_chat_command(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* sub = app.add_subcommand(
      "chat", "Interactive multi-turn chat with a checkpoint: a user message per line on stdin, replies on stdout");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint (.h5): base, fine-tune or merged")
      ->required()
      ->check(CLI::ExistingFile);
  add_moved_base_option(*sub, o->base);
  sub->add_option("--system", o->system, "a system message opening the conversation");
  add_sampling_options(sub, o->sampling, "sampling seed (reply i uses seed + i)");
  return [o]() {
    check_sampling_flags(o->sampling);
    const LoadedModel lm = load_model(o->checkpoint, o->base);
    require_chat_tokens(lm.tokenizer, o->checkpoint);
    Conversation conversation(lm, *o);
    conversation.require_room_for_a_message();
    const bool terminal = isatty(fileno(stdin));
    std::string line;
    while (true) {
      if (terminal) std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line)) break;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line == "/exit") break;
      if (line == "/reset") {
        conversation.reset();
        std::fprintf(stderr, "[conversation cleared]\n");
        continue;
      }
      if (line.empty()) continue;
      conversation.answer(line);
    }
    return 0;
  };
}

}  // namespace ember::apps

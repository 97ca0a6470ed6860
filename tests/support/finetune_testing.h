// Fixtures of the `ember finetune` and `ember align` tests (tests/apps/test_finetune.cpp,
// test_cli_finetune.cpp, test_cli_align.cpp, tests/mpi/train_parity_tool.cpp): a tiny base
// checkpoint whose tokenizer is the byte tokenizer plus <|endoftext|>, <|im_start|>,
// <|im_end|>, chat JSONL whose conversations have different lengths (rows padded differently,
// some cut at T+1) and trained-token counts, and preference pairs of different lengths.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>

#include "data/tokenizer/tokenizer.h"
#include "nn/checkpoint_file.h"
#include "nn/transformer.h"

namespace ember::testing {

// A dense model by default; moe: 4 experts, top 2, every layer.
inline nn::ModelConfig chat_base_config(bool moe = false) {
  std::string json =
      R"({"vocab_size": 264, "d_model": 16, "n_layers": 2, "n_heads": 2, "ffn_hidden": 32,
    "max_seq_len": 64, "qk_norm": true, "z_loss_coef": 1e-4, "dropout": 0.0)";
  if (moe)
    json += R"(, "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 16, "aux_loss_coef": 0.01,
    "router_z_loss_coef": 0.001})";
  return nn::ModelConfig::from_json(json + "}", "chat base config");
}

inline data::Tokenizer chat_tokenizer() {
  return data::Tokenizer::bytes({"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
}

// Writes the base checkpoint (weights from seed, no optimizer or run state) to path; untied:
// with an lm_head of its own.
inline void write_chat_base(const std::string& path, bool moe = false, uint64_t seed = 3,
                            bool untied = false) {
  nn::Checkpoint c;
  c.config = chat_base_config(moe);
  c.config.tie_embeddings = !untied;
  c.model = nn::Transformer(c.config, seed).state_dict();
  c.tokenizer_json = chat_tokenizer().to_json();
  nn::write_checkpoint(path, c);
}

// A base without the ChatML tokens: bytes and <|endoftext|>, vocab_size 257 (no spare rows).
inline void write_base_without_chat_tokens(const std::string& path) {
  nn::Checkpoint c;
  c.config = chat_base_config();
  c.config.vocab_size = 257;
  c.model = nn::Transformer(c.config, 3).state_dict();
  c.tokenizer_json = data::Tokenizer::bytes({"<|endoftext|>"}).to_json();
  nn::write_checkpoint(path, c);
}

// n conversations: i-th has a system message every third line, a user question and an
// assistant answer of 1 + (7 i mod 23) characters (some rows longer than 33 ids); every
// fifth line is a {"text"} line.
inline void write_chat_data(const std::string& path, int n = 24) {
  std::ofstream f(path);
  for (int i = 0; i < n; ++i) {
    const std::string answer(static_cast<size_t>(1 + (7 * i) % 23),
                             static_cast<char>('a' + i % 26));
    if (i % 5 == 4) {
      f << R"({"text": "plain )" << answer << "\"}\n";
      continue;
    }
    f << R"({"messages": [)";
    if (i % 3 == 0) f << R"({"role": "system", "content": "be brief"}, )";
    f << R"({"role": "user", "content": "q)" << i << R"("}, {"role": "assistant", "content": ")"
      << answer << "\"}]}\n";
  }
}

// n chat-form preference pairs (docs/formats.md#preference-data-jsonl) whose prompts and
// answers have different lengths; line `dropped` (1-based; 0: none) has a prompt of 60
// letters, so that no completion token is within T+1 <= 65 ids of it.
inline void write_pair_data(const std::string& path, int n, int dropped = 0) {
  std::ofstream f(path);
  for (int i = 1; i <= n; ++i) {
    std::string prompt = std::to_string(i);  // "q<i>", or 60 letters on the dropped line
    prompt = i == dropped ? std::string(60, 'p') : prompt.insert(0, 1, 'q');
    const std::string good(static_cast<size_t>(1 + (5 * i) % 9), static_cast<char>('a' + i % 26));
    const std::string bad(static_cast<size_t>(2 + (3 * i) % 7), static_cast<char>('z' - i % 26));
    f << R"({"prompt": [{"role": "user", "content": ")" << prompt << R"("}], "chosen": [{"role": )"
      << R"("assistant", "content": ")" << good << R"("}], "rejected": [{"role": "assistant", )"
      << R"("content": ")" << bad << "\"}]}\n";
  }
}

// n RL prompts (docs/formats.md#rl-prompts-jsonl) in the chat form: "q<i>" with the answer a
// letter (a random byte model's 16-token completion holds a given one now and then), every
// third line with a system message first.
inline void write_rl_prompts(const std::string& path, int n) {
  std::ofstream f(path);
  for (int i = 1; i <= n; ++i) {
    f << R"({"prompt": [)";
    if (i % 3 == 0) f << R"({"role": "system", "content": "be brief"}, )";
    f << R"({"role": "user", "content": "q)" << i << R"("}], "answer": ")"
      << static_cast<char>('a' + i % 26) << "\"}\n";
  }
}

}  // namespace ember::testing

// Hugging Face tokenizer.json for byte-level BPE: from_json accepts what the
// tokenizers library writes for GPT-2-style models (merges as "a b" strings or
// [a, b] pairs); to_json writes a file that library loads with the same ids.
#include <nlohmann/json.hpp>

#include <unordered_set>

#include "core/error.h"
#include "core/io/read_file.h"
#include "core/io/atomic_file.h"
#include "core/io/json_message.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/vocab_builder.h"

namespace ember::data {
namespace {

using nlohmann::json;

const json& require(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  EMBER_CHECK(it != j.end(), "tokenizer.json: ", where, " has no \"", key, "\"");
  return *it;
}

bool flag(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  EMBER_CHECK(it->is_boolean(), "tokenizer.json: \"", key, "\" must be true or false");
  return it->get<bool>();
}

std::string type_of(const json& j) {
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string("?");
}

// Component that must be null or of type ByteLevel (normalizer: null only).
void check_component(const json& root, const char* key, bool byte_level_ok) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return;
  EMBER_CHECK(byte_level_ok && it->is_object() && type_of(*it) == "ByteLevel", "tokenizer.json: ",
              key, " of type '", type_of(*it), "' is not supported (ember reads byte-level BPE: ",
              byte_level_ok ? "ByteLevel or null" : "null", ")");
}

// The BPE model's options: only those of plain byte-level BPE are accepted.
void read_model_options(const json& model, StringVocab& v) {
  EMBER_CHECK(model.is_object(), "tokenizer.json: \"model\" is not an object");
  const std::string model_type = model.value("type", std::string("BPE"));
  EMBER_CHECK(model_type == "BPE", "tokenizer.json: model type '", model_type,
              "' is not supported (ember reads BPE)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    EMBER_CHECK(it == model.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()),
                "tokenizer.json: model.", key, " is not supported");
  }
  EMBER_CHECK(!flag(model, "byte_fallback", false), "tokenizer.json: model.byte_fallback is not supported");
  auto dropout = model.find("dropout");
  EMBER_CHECK(dropout == model.end() || dropout->is_null() ||
                  (dropout->is_number() && dropout->get<double>() == 0.0),
              "tokenizer.json: BPE dropout is not supported");
  v.ignore_merges = flag(model, "ignore_merges", false);
  v.fuse_unk = flag(model, "fuse_unk", false);
  if (auto unk = model.find("unk_token"); unk != model.end() && !unk->is_null()) {
    EMBER_CHECK(unk->is_string(), "tokenizer.json: model.unk_token is not a string");
    v.unk_token = unk->get<std::string>();
  }
}

// model.vocab (token -> id) and model.merges ("a b" strings or ["a", "b"] pairs).
void read_vocab_and_merges(const json& model, StringVocab& v) {
  const json& vocab = require(model, "vocab", "model");
  EMBER_CHECK(vocab.is_object(), "tokenizer.json: model.vocab is not an object");
  v.vocab.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    EMBER_CHECK(it->is_number_unsigned() && it->get<uint64_t>() < UINT32_MAX, "tokenizer.json: model.vocab['",
                it.key(), "'] is not a token id (an integer in [0, 2^32 - 1))");
    v.vocab.emplace_back(it.key(), it->get<uint32_t>());
  }
  const json& merges = require(model, "merges", "model");
  EMBER_CHECK(merges.is_array(), "tokenizer.json: model.merges is not an array");
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      EMBER_CHECK(space != std::string::npos && space > 0 && space + 1 < s.size() &&
                      s.find(' ', space + 1) == std::string::npos,
                  "tokenizer.json: merge ", i, " ('", s, "') is not two tokens separated by a space");
      v.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else {
      EMBER_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                  "tokenizer.json: merge ", i, " is neither \"a b\" nor [\"a\", \"b\"]");
      v.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
  }
}

// The pipeline around the model: no normalizer, ByteLevel (or null) decoder and post-processor,
// and a ByteLevel pre-tokenizer with its regex.
void read_pipeline(const json& root, StringVocab& v) {
  check_component(root, "normalizer", false);
  check_component(root, "decoder", true);
  check_component(root, "post_processor", true);
  auto pre = root.find("pre_tokenizer");
  EMBER_CHECK(pre != root.end() && pre->is_object() && type_of(*pre) == "ByteLevel",
              "tokenizer.json: pre_tokenizer of type '",
              pre == root.end() || pre->is_null() ? std::string("null") : type_of(*pre),
              "' is not supported (ember reads ByteLevel)");
  EMBER_CHECK(flag(*pre, "use_regex", true),
              "tokenizer.json: ByteLevel pre_tokenizer with use_regex false is not supported");
  v.add_prefix_space = flag(*pre, "add_prefix_space", false);
}

// added_tokens: id and content each, none using lstrip, rstrip or single_word.
void read_added_tokens(const json& root, StringVocab& v) {
  auto added = root.find("added_tokens");
  if (added == root.end() || added->is_null()) return;
  EMBER_CHECK(added->is_array(), "tokenizer.json: added_tokens is not an array");
  for (const json& a : *added) {
    EMBER_CHECK(a.is_object() && a.contains("id") && a["id"].is_number_unsigned() &&
                    a["id"].get<uint64_t>() < UINT32_MAX && a.contains("content") && a["content"].is_string(),
                "tokenizer.json: an added token lacks an integer \"id\" in [0, 2^32 - 1) or a string \"content\"");
    SpecialToken s{a["content"].get<std::string>(), a["id"].get<uint32_t>(),
                   flag(a, "special", true)};
    for (const char* key : {"lstrip", "rstrip", "single_word"})
      EMBER_CHECK(!flag(a, key, false), "tokenizer.json: added token '", s.content,
                  "' uses ", key, ", which is not supported");
    v.added.push_back(std::move(s));
  }
}

StringVocab parse(const json& root) {
  EMBER_CHECK(root.is_object(), "tokenizer.json: the top level is not a JSON object");
  StringVocab v;
  const json& model = require(root, "model", "the file");
  read_model_options(model, v);
  read_vocab_and_merges(model, v);
  read_pipeline(root, v);
  read_added_tokens(root, v);
  return v;
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view json_text) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    throw Error("tokenizer.json: malformed JSON: " + json_message(e.what()));
  }
  try {
    return tokenizer_from_strings(parse(root), "tokenizer.json");
  } catch (const json::exception& e) {
    throw Error("tokenizer.json: unexpected content: " + json_message(e.what()));
  }
}

// Written by hand (not through a JSON object) to keep vocab and merges in id
// and rank order and to stay linear in the vocabulary size.
std::string Tokenizer::to_json() const {
  const StringVocab v = tokenizer_to_strings(*this);
  auto str = [](std::string_view s) { return json(s).dump(); };
  auto byte_level = [](bool prefix, bool trim) {
    return std::string("{\"type\": \"ByteLevel\", \"add_prefix_space\": ") +
           (prefix ? "true" : "false") + ", \"trim_offsets\": " + (trim ? "true" : "false") +
           ", \"use_regex\": true}";
  };
  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  out += "  \"added_tokens\": [";
  for (size_t i = 0; i < v.added.size(); ++i) {
    const auto& a = v.added[i];
    out += (i ? ",\n    " : "\n    ") + std::string("{\"id\": ") + std::to_string(a.id) +
           ", \"content\": " + str(a.content) +
           ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
           "\"normalized\": false, \"special\": " +
           (a.special ? "true" : "false") + "}";
  }
  out += v.added.empty() ? "],\n" : "\n  ],\n";
  out += "  \"normalizer\": null,\n";
  out += "  \"pre_tokenizer\": " + byte_level(v.add_prefix_space, true) + ",\n";
  out += "  \"post_processor\": " + byte_level(true, false) + ",\n";
  out += "  \"decoder\": " + byte_level(true, true) + ",\n";
  out += "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": ";
  out += v.unk_token.empty() ? std::string("null") : str(v.unk_token);
  out += ",\n    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
         "    \"fuse_unk\": ";
  out += v.fuse_unk ? "true" : "false";
  out += ",\n    \"byte_fallback\": false,\n";
  if (v.ignore_merges) out += "    \"ignore_merges\": true,\n";
  out += "    \"vocab\": {";
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < v.vocab.size(); ++i) {
    const auto& [key, id] = v.vocab[i];
    EMBER_CHECK(seen.insert(key).second, "to_json: two tokens share the string '", key, "'");
    out += (i ? ",\n      " : "\n      ") + str(key) + ": " + std::to_string(id);
  }
  out += "\n    },\n    \"merges\": [";
  for (size_t i = 0; i < v.merges.size(); ++i)
    out += (i ? ",\n      " : "\n      ") + str(v.merges[i].first + " " + v.merges[i].second);
  out += v.merges.empty() ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n";
  return out;
}

Tokenizer Tokenizer::load(const std::string& path) {
  const std::string text = read_file(path, "tokenizer.json file", kMaxTokenizerFileBytes);
  try {
    return from_json(text);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

void Tokenizer::save(const std::string& path) const { write_file_atomically(path, to_json()); }

}  // namespace ember::data

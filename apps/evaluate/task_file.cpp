// Parsing and checking a multiple-choice task file (see task_file.h).
#include "apps/evaluate/task_file.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/io/read_file.h"

namespace ember::apps {
namespace {

using nlohmann::json;

// One line's item; an Error whose text is the problem (the caller prefixes FILE:LINE).
ChoiceItem parse_item(const std::string& line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::parse_error& e) {
    throw Error("not a JSON object (" +
                std::string(e.what()).substr(std::string(e.what()).find(']') + 2) + ")");
  }
  EMBER_CHECK(j.is_object(), "not a JSON object but ", j.type_name());
  for (const char* key : {"context", "choices", "gold"})
    EMBER_CHECK(j.contains(key), "missing key \"", key, "\"");
  ChoiceItem item;
  EMBER_CHECK(j["context"].is_string(), "\"context\" must be a string, got ",
              j["context"].type_name());
  item.context = j["context"].get<std::string>();
  const json& choices = j["choices"];
  EMBER_CHECK(choices.is_array(), "\"choices\" must be a list of strings, got ",
              choices.type_name());
  EMBER_CHECK(choices.size() >= 2, "\"choices\" needs at least 2 entries, got ", choices.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    EMBER_CHECK(choices[i].is_string(), "choice ", i, " must be a string, got ",
                choices[i].type_name());
    item.choices.push_back(choices[i].get<std::string>());
    EMBER_CHECK(!item.choices.back().empty(), "choice ", i,
                " is empty (acc_norm divides by its length)");
  }
  const json& gold = j["gold"];
  EMBER_CHECK(gold.is_number_integer(), "\"gold\" must be an integer, got ", gold.dump());
  item.gold = gold.get<int64_t>();
  EMBER_CHECK(item.gold >= 0 && item.gold < static_cast<int64_t>(item.choices.size()), "\"gold\" ",
              item.gold, " is out of range for ", item.choices.size(), " choices (0 to ",
              item.choices.size() - 1, ")");
  return item;
}

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace

std::vector<ChoiceItem> parse_tasks(const std::string& text, const std::string& name) {
  std::vector<ChoiceItem> items;
  std::istringstream in(text);
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (blank(line)) continue;
    try {
      items.push_back(parse_item(line));
    } catch (const Error& e) {
      throw Error(name + ":" + std::to_string(number) + ": " + e.what());
    }
    items.back().line = number;
  }
  EMBER_CHECK(
      !items.empty(), name,
      ": no items (one JSON object per line: {\"context\": ..., \"choices\": [...], \"gold\": i})");
  return items;
}

std::vector<ChoiceItem> read_tasks(const std::string& path) {
  return parse_tasks(read_file(path, "task file", kMaxTextFileBytes), path);
}

}  // namespace ember::apps

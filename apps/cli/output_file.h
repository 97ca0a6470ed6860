// Outputs that a command may replace (ember plot's SVG, ember bench --json):
// an existing file is replaced only when it is of the kind being written, so
// a mistyped --out never destroys a checkpoint or another file; the write
// itself goes through core/io/atomic_file.h.
#pragma once
#include <initializer_list>
#include <string>
#include <string_view>

namespace ember::apps {

// Throws an Error naming `option` and `path` when `path` is a folder, or an
// existing non-empty file whose first bytes (after white space) are none of
// `starts` (e.g. {"<?xml", "<svg"} for an SVG, {"{"} for JSON).
void require_replaceable(const std::string& option, const std::string& path, const std::string& kind,
                         std::initializer_list<std::string_view> starts);

}  // namespace ember::apps

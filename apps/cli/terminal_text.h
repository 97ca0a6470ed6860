// Generated text as `ember generate` and `ember chat` show it on a terminal: valid
// UTF-8 (each invalid sequence as U+FFFD, serve's rule in apps/common/utf8_text.h) and
// every control character other than \n and \t written as an escape, so a model's
// output cannot move the cursor, clear the screen or retitle the window (docs/cli.md).
#pragma once
#include <string>
#include <string_view>

namespace ember::apps {

// bytes (whole characters, as Utf8Assembler hands them out) for a terminal: C0 controls
// and DEL as \xHH (e.g. \x1b), C1 controls (U+0080-U+009F) as \uHHHH (e.g. \u009b).
std::string terminal_text(std::string_view bytes);

}  // namespace ember::apps

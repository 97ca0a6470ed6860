// ember: train · eval · generate · tokenize · info. The only place that turns
// an ember::Error into one line on stderr and a non-zero exit.
#include <cstdio>
#include <map>

#include "apps/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"ember: a small PyTorch-style LLM training framework in C++"};
  app.set_version_flag("--version", "ember 0.1.0");
  app.require_subcommand(1);
  std::map<CLI::App*, ember::apps::CommandRunner> runners;
  auto add = [&](ember::apps::CommandRunner (*fn)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    ember::apps::CommandRunner run = fn(app);
    runners[app.get_subcommands({})[before]] = std::move(run);
  };
  add(ember::apps::add_train_command);
  add(ember::apps::add_eval_command);
  add(ember::apps::add_tokenize_command);
  add(ember::apps::add_generate_command);
  add(ember::apps::add_info_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "ember: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

// peak_rss OUT -- PROGRAM ARGS...: runs PROGRAM, waits for it with wait4() and
// writes its peak resident set size (ru_maxrss, KiB) to OUT.RANK (RANK: Open
// MPI's OMPI_COMM_WORLD_RANK, else 0); exits with PROGRAM's status. Put under
// mpirun (`mpirun -np 2 peak_rss OUT -- ember train ...`) it measures each rank.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "usage: peak_rss OUT -- PROGRAM [ARGS...]\n");
    return 2;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::perror("peak_rss: fork");
    return 2;
  }
  if (child == 0) {
    execvp(argv[3], argv + 3);
    std::perror("peak_rss: exec");
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  if (wait4(child, &status, 0, &usage) < 0) {
    std::perror("peak_rss: wait4");
    return 2;
  }
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string path = std::string(argv[1]) + "." + (rank ? rank : "0");
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fprintf(f, "%ld\n", usage.ru_maxrss);
    std::fclose(f);
  } else {
    std::perror(("peak_rss: " + path).c_str());
    return 2;
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

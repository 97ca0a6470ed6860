// `ember serve --request-timeout 2` against slow and oversized requests over raw TCP:
// a request whose headers trickle in (one byte every 0.5 s) gets 408 and is closed
// within ~2 s, an idle connection is closed after 2 s (not the 5 s keep-alive), a
// 64 KiB + 4 bytes head gets 431; meanwhile a normal request and a stream read slowly for
// longer than the deadline succeed, and /health answers afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "autograd/grad_mode.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/checkpoint_file.h"
#include "temp_dir.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// `ember serve` on a zeroed 257-token model (bytes + <|endoftext|>), stopped by SIGTERM.
struct Server {
  testing::TempDir dir{"serve_deadline"};
  pid_t pid = -1;
  int port = 0;

  explicit Server(const std::string& extra_args) {
    nn::Checkpoint c;
    c.config = nn::ModelConfig::from_json(
        R"({"vocab_size": 257, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_hidden": 32, "max_seq_len": 512})");
    nn::Transformer model(c.config, 1);
    NoGradGuard no_grad;
    for (const Variable& p : model.parameters()) p.data().fill_(0.0);
    c.model = model.state_dict();
    c.tokenizer_json = data::Tokenizer::bytes({"<|endoftext|>"}).to_json();
    nn::write_checkpoint(dir / "zero.h5", c);

    const std::string cmd = "exec " + std::string(EMBER_BINARY) + " serve --checkpoint " +
                            (dir / "zero.h5") + " --port 0 --threads 8 " + extra_args + " 2> " +
                            (dir / "err");
    int out[2];
    REQUIRE(pipe(out) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      dup2(out[1], 1);
      close(out[0]);
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    FILE* f = fdopen(out[0], "r");
    char line[512] = {};
    REQUIRE(std::fgets(line, sizeof line, f) != nullptr);
    std::fclose(f);
    const std::string text = line;
    const size_t colon = text.rfind(':', text.find(" (model"));
    REQUIRE(colon != std::string::npos);
    port = std::stoi(text.substr(colon + 1));
  }
  ~Server() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }

  int connect_socket(int rcvbuf = 0) const {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    return s;
  }
};

bool send_text(int s, const std::string& text) {
  return send(s, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// Everything the peer sends until it closes (or `limit` seconds pass).
std::string read_until_closed(int s, double limit = 20) {
  std::string got;
  const auto start = Clock::now();
  char buf[4096];
  while (seconds_since(start) < limit) {
    pollfd p{s, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(s, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

std::string post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: " +
         "application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Sends a request line, then one header byte every 0.5 s until the server closes.
struct Slowloris {
  double closed_after = -1;
  std::string answer;
  void run(const Server& server) {
    const int s = server.connect_socket();
    const auto start = Clock::now();
    send_text(s, "POST /v1/completions HTTP/1.1\r\n");
    // Bytes at 0.25, 0.75, 1.25 ... s: none lands as the 2 s deadline passes (a byte the
    // server has not read when it closes would reset the connection and lose its answer).
    for (int i = 0; seconds_since(start) < 10; ++i) {
      pollfd p{s, POLLIN, 0};
      if (poll(&p, 1, i == 0 ? 250 : 500) > 0) break;  // the answer, or the close
      if (!send_text(s, "X")) break;
    }
    answer = read_until_closed(s, 5);
    closed_after = seconds_since(start);
    close(s);
  }
};

}  // namespace

TEST_CASE("serve: --request-timeout cuts slow requests, never a running handler", "[serve][cli]") {
  const Server server("--request-timeout 2");
  Slowloris slow;
  std::thread slow_thread([&] { slow.run(server); });

  // A normal request while the slow one trickles.
  const int plain = server.connect_socket();
  REQUIRE(send_text(plain, post("/v1/completions", R"({"prompt": "hi", "max_tokens": 4})")));
  const std::string plain_answer = read_until_closed(plain);
  close(plain);
  CHECK(plain_answer.rfind("HTTP/1.1 200", 0) == 0);

  // A stream read slowly (a small receive buffer, a 3 s pause): longer than the deadline.
  const auto stream_start = Clock::now();
  const int stream = server.connect_socket(2048);
  REQUIRE(send_text(stream, post("/v1/completions", R"({"prompt": "a", "max_tokens": 400,)"
                                                    R"( "temperature": 0, "stream": true})")));
  char first[64];
  REQUIRE(recv(stream, first, sizeof first, 0) > 0);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::string rest = read_until_closed(stream);
  close(stream);
  CHECK(std::string(first, 12) == "HTTP/1.1 200");
  CHECK(rest.find("\"finish_reason\":\"length\"") != std::string::npos);
  CHECK(rest.find("data: [DONE]") != std::string::npos);
  CHECK(seconds_since(stream_start) > 3);

  slow_thread.join();
  CHECK(slow.closed_after > 1.5);
  CHECK(slow.closed_after < 3.5);
  CHECK(slow.answer.rfind("HTTP/1.1 408", 0) == 0);
  CHECK(slow.answer.find("Connection: close") != std::string::npos);
  CHECK(slow.answer.find("\"code\":\"request_timeout\"") != std::string::npos);

  // An idle connection closes at the deadline (the keep-alive timeout is 5 s).
  const int idle = server.connect_socket();
  const auto idle_start = Clock::now();
  CHECK(read_until_closed(idle, 10).empty());
  close(idle);
  CHECK(seconds_since(idle_start) > 1.5);
  CHECK(seconds_since(idle_start) < 3.5);

  // A head larger than 64 KiB, sent at once: 431.
  const int flood = server.connect_socket();
  std::string head = "GET /health HTTP/1.1\r\nHost: x\r\n";
  while (head.size() < 65'540) head += "X";  // one long line, no blank line: a 4-byte excess
  send_text(flood, head);
  const std::string flood_answer = read_until_closed(flood);
  close(flood);
  CHECK(flood_answer.rfind("HTTP/1.1 431", 0) == 0);

  const int health = server.connect_socket();
  REQUIRE(send_text(health, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string health_answer = read_until_closed(health);
  close(health);
  CHECK(health_answer.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(health_answer.find("{\"status\":\"ok\"}") != std::string::npos);
}

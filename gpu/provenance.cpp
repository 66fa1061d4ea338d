#include "gpu/provenance.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <ctime>
#include <sstream>

namespace tpusim::gpu {

std::string shell_quote(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  q += '\'';
  return q;
}

Provenance provenance(int argc, const char* const* argv) {
  Provenance p;
  for (int i = 0; i < argc; ++i) {
    if (i) p.command += ' ';
    p.command += shell_quote(argv[i]);
  }
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  p.date = buf;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) p.host = host;
  return p;
}

std::string kernel_module_version(const std::string& line) {
  const auto at = line.find("Kernel Module");
  if (at == std::string::npos) return line;
  std::istringstream words(line.substr(at + 13));
  for (std::string w; words >> w;)
    if (std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos) return w;
  return line;
}

}  // namespace tpusim::gpu

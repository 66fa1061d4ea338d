// Shared by the libFuzzer targets. A target's contract: tpusim::InputError is the expected way to
// reject bad input; anything else (another exception, a failed round trip, a crash, a sanitizer
// report) is a finding, reported here and turned into a crash so libFuzzer saves the input.
#pragma once

#include <cxxabi.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <span>
#include <string>
#include <typeinfo>

namespace tpusim::fuzz {

[[noreturn]] inline void finding(const char* format, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] inline void finding(const char* format, ...) {
  std::fputs("\n=== tpusim fuzz finding: ", stderr);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputs("\n", stderr);
  std::fflush(stderr);
  std::abort();
}

// Runs `body`; an exception escaping it (InputError included: `body` catches the ones it expects)
// is a finding. std::bad_alloc passes through: fuzz_assemble caps allocations and skips inputs
// that hit the cap (elsewhere it ends the run as an uncaught exception, still a finding).
template <typename F>
int guarded(const char* stage, F&& body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    int status = 0;
    char* type = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
    finding("%s: unexpected exception %s: %s", stage, status == 0 ? type : typeid(e).name(), e.what());
  } catch (...) {
    finding("%s: unexpected non-std exception", stage);
  }
  return 0;
}

// First offset where two byte strings differ (or the shorter length), for messages.
inline size_t first_difference(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

inline std::string hex(std::span<const uint8_t> bytes) {
  std::string out;
  char buf[4];
  for (uint8_t b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x ", b);
    out += buf;
  }
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace tpusim::fuzz

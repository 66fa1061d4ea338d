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
#include <vector>

#include "isa/error.h"
#include "isa/program.h"

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

// The container contract for a Program `p` that `stage` accepted: write_program takes it, the
// bytes read back to an equal Program, and writing that again gives the same bytes. Returns them.
inline std::vector<uint8_t> check_container_round_trip(const char* stage, const isa::Program& p) {
  std::vector<uint8_t> bytes;
  try {
    bytes = isa::write_program(p);
  } catch (const InputError& e) {
    finding("%s accepted the input but write_program rejects the result: %s", stage, e.what());
  }
  isa::Program back;
  try {
    back = isa::read_program(bytes, "written.tpu");
  } catch (const InputError& e) {
    finding("%s: write_program output does not read back: %s", stage, e.what());
  }
  if (!(back == p)) finding("%s: read_program(write_program(p)) != p", stage);
  const std::vector<uint8_t> again = isa::write_program(back);
  if (again != bytes)
    finding("%s: write_program is not deterministic: first difference at byte %zu", stage,
            first_difference(again, bytes));
  return bytes;
}

}  // namespace tpusim::fuzz

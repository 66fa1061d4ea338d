// Small helpers shared by the isa tests: a scratch directory, file I/O, hex dumps, and the plain
// CRC-32 the .tpu container is specified with (written out here so the tests do not borrow the
// library's own implementation).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>
#include "tools/source_dir.h"

namespace tpusim::test {

// The repository root, for committed files (workloads, docs, hw): tools/source_dir.h.
inline std::filesystem::path source_dir() { return tpusim::source_dir(); }

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    for (;;) {
      path_ = std::filesystem::temp_directory_path() / ("tpusim-test-" + std::to_string(rd()));
      if (std::filesystem::create_directory(path_)) break;
    }
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& p, std::span<const uint8_t> data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

// "30 03 56 ..." so that byte mismatches print readably.
inline std::string hex(std::span<const uint8_t> bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    if (!out.empty()) out += ' ';
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

// CRC-32 (ISO-HDLC, as zlib and PNG): reflected polynomial 0xEDB88320, initial value and final
// xor 0xFFFFFFFF, one bit at a time.
inline uint32_t crc32(std::span<const uint8_t> data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
  }
  return ~crc;
}

inline std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The reference for init=random(SEED): splitmix64 (Steele, Lea, Flood 2014) written out, byte i
// the top byte of output i.
inline std::vector<uint8_t> splitmix_bytes(uint64_t seed, size_t n) {
  std::vector<uint8_t> out;
  uint64_t state = seed;
  for (size_t i = 0; i < n; ++i) {
    state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z = z ^ (z >> 31);
    out.push_back(static_cast<uint8_t>(z >> 56));
  }
  return out;
}

}  // namespace tpusim::test

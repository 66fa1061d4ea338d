// Reading and writing the files tpusim is given, safely whatever they are.
//
// Inputs: regular files only (a device, FIFO or directory is refused by name, following
// symlinks), their size checked against a limit for their kind before anything is allocated,
// then read in bounded pieces. Outputs: refused when they name an input; written to a temporary
// file beside the destination and renamed over it, so a failed write (a full or read-only disk)
// leaves the old file or nothing, never a partial one; every "cannot write" carries the OS reason.
// A destination that exists and is not a regular file (/dev/null, /dev/stdout, a FIFO) is
// written in place. Every failure is an InputError naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpusim::io {

// Size limits per kind of input (docs/limits.md). Text inputs are descriptions written or
// generated for tpusim; the binary ones carry weight images (at most isa::kMaxDataBytes each).
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;   // --arch JSON, sweep specs
inline constexpr uint64_t kMaxModelBytes = uint64_t{64} << 20;    // model TOML, SCALE-Sim CSV
inline constexpr uint64_t kMaxAssemblyBytes = uint64_t{1} << 30;  // assembly source (.s)
inline constexpr uint64_t kMaxProgramBytes = uint64_t{4} << 30;   // a .tpu container
inline constexpr uint64_t kMaxDataFileBytes = uint64_t{4} << 30;  // .npy, .bin, reports, GPU data

// An open regular input file. Throws InputError: "PATH: cannot open: REASON", "PATH: not a
// regular file (a character device)", "PATH: N bytes, more than the M bytes allowed for WHAT".
class InputFile {
 public:
  InputFile(const std::filesystem::path& path, uint64_t max_bytes, std::string_view what);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  uint64_t size() const { return size_; }
  // Reads exactly out.size() bytes from the current position (in pieces of at most 16 MiB);
  // throws when the file ends first or a read fails.
  void read(std::span<uint8_t> out);

 private:
  std::string name_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole file, checked as InputFile does. `what` names the kind of input in messages
// ("an assembly source").
std::string read_text_file(const std::filesystem::path& path, uint64_t max_bytes, std::string_view what);
std::vector<uint8_t> read_binary_file(const std::filesystem::path& path, uint64_t max_bytes,
                                      std::string_view what);

// Throws "FLAG PATH: is the input INPUT; choose another output (tpusim never overwrites its
// inputs)" when `output` names the same file as one of `inputs` (hard links and symlinks
// included). Empty paths and "-" are skipped.
void refuse_input_as_output(const std::string& output, std::string_view flag,
                            std::span<const std::string> inputs);

// Writes `data` to `path` (temporary file + rename). Throws "PATH: cannot write: REASON".
void write_file(const std::filesystem::path& path, std::string_view data);
void write_file(const std::filesystem::path& path, std::span<const uint8_t> data);

// A file written as a stream: everything goes to a temporary file that commit() renames over
// `path`; destroyed without commit() (an error), the temporary file is removed. stream() is
// checked after every write by the caller or at commit(), which throws with the OS reason.
class OutputFile {
 public:
  explicit OutputFile(const std::filesystem::path& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  std::ostream& stream();
  uint64_t bytes_written() const;
  // Writes past `max_bytes` fail; commit() then throws "PATH: not written: more than MAX bytes
  // (`hint`)" and leaves nothing behind. 0: no limit.
  void limit(uint64_t max_bytes, std::string hint);
  // Throws "PATH: cannot write: REASON" when any write failed; else makes the file visible.
  void commit();
  // The error a failed write gives, for callers that stop early (e.g. a size limit).
  [[noreturn]] void fail(const std::string& why);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// An exclusive advisory lock (flock) on `path`, created if missing, held until destruction.
// Throws "PATH: WHY" when another process still holds it after 3 s (`why` says who and what to do).
class FileLock {
 public:
  FileLock(const std::filesystem::path& path, std::string_view why);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// Memory this process may use: the least of physical memory, its cgroup's memory.max and
// RLIMIT_AS. Limits derived from it are checked before large allocations.
uint64_t usable_memory_bytes();
// "25165824 bytes (24.0 MiB)": a size as messages print it.
std::string size_text(uint64_t bytes);

}  // namespace tpusim::io

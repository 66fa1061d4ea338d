#include "isa/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <streambuf>

#include "isa/error.h"

namespace fs = std::filesystem;

namespace tpusim::io {
namespace {

constexpr size_t kPiece = size_t{16} << 20;  // bytes per read()/write() call

std::string reason(int err) { return std::strerror(err); }

std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

}  // namespace

std::string size_text(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30))
    return fmt::format("{} bytes ({:.1f} GiB)", bytes, double(bytes) / (1 << 30));
  if (bytes >= (uint64_t{1} << 20))
    return fmt::format("{} bytes ({:.1f} MiB)", bytes, double(bytes) / (1 << 20));
  return fmt::format("{} bytes", bytes);
}

uint64_t usable_memory_bytes() {
  uint64_t bytes = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGESIZE));
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::FILE* f = std::fopen(path, "r");
    if (!f) continue;
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) == 1 && v > 0) bytes = std::min<uint64_t>(bytes, v);  // "max": no limit
    std::fclose(f);
  }
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    bytes = std::min<uint64_t>(bytes, lim.rlim_cur);
  return bytes;
}

namespace {

mode_t new_file_mode() {
  static const mode_t mode = [] {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    return mode_t(0666 & ~mask);
  }();
  return mode;
}

[[noreturn]] void cannot_write(const fs::path& path, int err) {
  throw InputError(fmt::format("{}: cannot write: {}", path.string(), reason(err)));
}

// A streambuf over a file descriptor that remembers the first write error.
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd), buf_(1 << 20) { setp(buf_.data(), buf_.data() + buf_.size()); }
  int error() const { return error_; }
  void limit(uint64_t max) { max_ = max; }
  bool over_limit() const { return over_; }
  uint64_t written() const { return written_ + uint64_t(pptr() - pbase()); }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* p = pbase();
    size_t left = size_t(pptr() - pbase());
    if (max_ && written_ + left > max_ && error_ == 0) over_ = true, error_ = EFBIG;
    while (left > 0 && error_ == 0) {
      const ssize_t n = ::write(fd_, p, std::min(left, kPiece));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = n < 0 ? errno : ENOSPC;
        break;
      }
      p += n, left -= size_t(n), written_ += uint64_t(n);
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return error_ == 0;
  }
  int fd_;
  std::vector<char> buf_;
  int error_ = 0;
  uint64_t written_ = 0, max_ = 0;
  bool over_ = false;
};

}  // namespace

// ---- inputs ---------------------------------------------------------------------------------

InputFile::InputFile(const fs::path& path, uint64_t max_bytes, std::string_view what) : name_(path.string()) {
  // O_NONBLOCK: opening a FIFO with no writer must not wait; fstat then refuses it.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot open: {}", name_, reason(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw InputError(fmt::format("{}: cannot open: {}", name_, reason(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{}: is a directory", name_));
    throw InputError(
        fmt::format("{}: is {}, not a regular file; expected {}", name_, kind_of(st.st_mode), what));
  }
  size_ = uint64_t(st.st_size);
  if (size_ > max_bytes) {
    ::close(fd_);
    throw InputError(fmt::format("{}: {}, more than the {} allowed for {}", name_, size_text(size_),
                                 size_text(max_bytes), what));
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read(std::span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd_, out.data() + done, std::min(out.size() - done, kPiece));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(fmt::format("{}: cannot read: {}", name_, reason(errno)));
    if (n == 0)
      throw InputError(
          fmt::format("{}: the file shrank while being read ({} of {} bytes)", name_, done, out.size()));
    done += size_t(n);
  }
}

std::string read_text_file(const fs::path& path, uint64_t max_bytes, std::string_view what) {
  InputFile f(path, max_bytes, what);
  std::string text(f.size(), '\0');
  f.read({reinterpret_cast<uint8_t*>(text.data()), text.size()});
  return text;
}

std::vector<uint8_t> read_binary_file(const fs::path& path, uint64_t max_bytes, std::string_view what) {
  InputFile f(path, max_bytes, what);
  std::vector<uint8_t> bytes(f.size());
  f.read(bytes);
  return bytes;
}

// ---- outputs --------------------------------------------------------------------------------

void refuse_input_as_output(const std::string& output, std::string_view flag,
                            std::span<const std::string> inputs) {
  if (output.empty() || output == "-") return;
  for (const std::string& in : inputs) {
    if (in.empty() || in == "-") continue;
    std::error_code ec;
    if (fs::equivalent(output, in, ec) && !ec)
      throw InputError(
          fmt::format("{} {}: is the input {}; choose another output (tpusim never overwrites its inputs)",
                      flag, output, in));
  }
}

struct OutputFile::Impl {
  fs::path path, temp;  // temp empty: written in place (not a regular file)
  int fd = -1;
  std::unique_ptr<FdBuf> buf;
  std::unique_ptr<std::ostream> stream;
  bool committed = false;
  uint64_t max_bytes = 0;
  std::string limit_hint;
};

OutputFile::OutputFile(const fs::path& path) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) cannot_write(path, EISDIR);
    m.fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (m.fd < 0) cannot_write(path, errno);
  } else {
    std::error_code ec;
    // A symlink to a file: replace the file it names, not the link.
    if (fs::is_symlink(path, ec)) m.path = fs::weakly_canonical(path, ec);
    if (ec) m.path = path;
    const fs::path dir = m.path.has_parent_path() ? m.path.parent_path() : fs::path(".");
    std::string templ = (dir / fmt::format(".{}.tmp-XXXXXX", m.path.filename().string())).string();
    m.fd = ::mkstemp(templ.data());
    if (m.fd < 0) cannot_write(path, errno);
    m.temp = templ;
    ::fchmod(m.fd, S_ISREG(st.st_mode) ? (st.st_mode & 07777) : new_file_mode());
  }
  m.buf = std::make_unique<FdBuf>(m.fd);
  m.stream = std::make_unique<std::ostream>(m.buf.get());
}

OutputFile::~OutputFile() {
  if (impl_->fd >= 0) ::close(impl_->fd);
  if (!impl_->committed && !impl_->temp.empty()) ::unlink(impl_->temp.c_str());
}

std::ostream& OutputFile::stream() { return *impl_->stream; }

uint64_t OutputFile::bytes_written() const { return impl_->buf->written(); }

void OutputFile::limit(uint64_t max_bytes, std::string hint) {
  impl_->max_bytes = max_bytes;
  impl_->limit_hint = std::move(hint);
  impl_->buf->limit(max_bytes);
}

void OutputFile::fail(const std::string& why) {
  Impl& m = *impl_;
  if (m.fd >= 0) ::close(m.fd);
  m.fd = -1;
  if (!m.temp.empty()) ::unlink(m.temp.c_str());
  m.temp.clear();
  throw InputError(fmt::format("{}: not written: {}", m.path.string(), why));
}

void OutputFile::commit() {
  Impl& m = *impl_;
  m.stream->flush();
  if (m.buf->over_limit()) fail(fmt::format("more than {} ({})", size_text(m.max_bytes), m.limit_hint));
  int err = m.buf->error();
  if (err == 0 && !m.stream->good()) err = EIO;
  if (err == 0 && !m.temp.empty() && ::fsync(m.fd) != 0 && errno != EINVAL) err = errno;
  if (::close(m.fd) != 0 && err == 0) err = errno;
  m.fd = -1;
  if (err == 0 && !m.temp.empty() && ::rename(m.temp.c_str(), m.path.c_str()) != 0) err = errno;
  if (err != 0) {
    if (!m.temp.empty()) ::unlink(m.temp.c_str());
    m.temp.clear();
    cannot_write(m.path, err);
  }
  m.committed = true;
}

void write_file(const fs::path& path, std::string_view data) {
  OutputFile f(path);
  f.stream().write(data.data(), std::streamsize(data.size()));
  f.commit();
}

void write_file(const fs::path& path, std::span<const uint8_t> data) {
  write_file(path, std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
}

FileLock::FileLock(const fs::path& path, std::string_view why) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, new_file_mode());
  if (fd_ < 0) cannot_write(path, errno);
  // A few seconds' grace: a process that has just died may still be releasing it (a child caught
  // between fork and exec holds the parent's descriptors for a moment).
  int rc = 0;
  for (int tries = 0; (rc = ::flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EWOULDBLOCK && tries < 60; ++tries)
    ::usleep(50'000);
  if (rc != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) throw InputError(fmt::format("{}: {}", path.string(), why));
    throw InputError(fmt::format("{}: cannot lock: {}", path.string(), reason(err)));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tpusim::io

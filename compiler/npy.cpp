// NumPy .npy files: the format of numpy.lib.format (magic "\x93NUMPY", version, a little-endian
// header length, a Python dict literal with 'descr', 'fortran_order' and 'shape', then the raw
// elements). Versions 1.0 (16-bit header length), 2.0 and 3.0 (32-bit); C order; the dtypes in
// kDtypes. Everything is checked before it is trusted: a malformed file is an InputError.
#include "compiler/npy.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <variant>

#include "isa/error.h"
#include "isa/file_io.h"

namespace tpusim::compiler {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct DtypeInfo {
  std::string_view descr;  // canonical
  std::string_view alias;  // also accepted ('=' native order on a little-endian layout)
  size_t size;
  std::string_view name;
};
constexpr std::array<DtypeInfo, 6> kDtypes{{
    {"<f4", "=f4", 4, "float32"},
    {"<f8", "=f8", 8, "float64"},
    {"|i1", "=i1", 1, "int8"},
    {"|u1", "=u1", 1, "uint8"},
    {"<i4", "=i4", 4, "int32"},
    {"<i8", "=i8", 8, "int64"},  // NumPy's default integer and PyTorch's long: labels, class indices
}};

const DtypeInfo* find_dtype(std::string_view descr) {
  for (const DtypeInfo& d : kDtypes)
    if (descr == d.descr || descr == d.alias) return &d;
  return nullptr;
}

std::string supported_dtypes() {
  std::string out;
  for (const DtypeInfo& d : kDtypes) out += fmt::format("{}'{}' ({})", out.empty() ? "" : ", ", d.descr, d.name);
  return out;
}

uint64_t checked_product(const std::vector<uint64_t>& dims, uint64_t factor) {
  uint64_t p = factor;
  for (uint64_t d : dims)
    if (__builtin_mul_overflow(p, d, &p)) return UINT64_MAX;
  return p;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

// The header's Python literal: {'key': value, ...} with string, bool and int-tuple values.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  using Value = std::variant<std::string, bool, std::vector<uint64_t>>;

  std::map<std::string, Value> dict() {
    std::map<std::string, Value> out;
    items('{', '}', [&] {
      skip_space();
      const size_t at = pos_;
      std::string key = string();
      if (out.count(key)) fail(at, fmt::format("key '{}' given twice", key));
      expect(':');
      out[key] = value();
    });
    skip_space();
    if (pos_ != text_.size()) fail(pos_, "unexpected text after the dict");
    return out;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw InputError(fmt::format("{}: .npy header, character {}: {} (header: {})", source_, at + 1, what,
                                 std::string(text_.substr(0, 200))));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(pos_, fmt::format("expected '{}'", c));
    ++pos_;
  }
  std::string string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail(pos_, "expected a quoted string");
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail(pos_, "unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  uint64_t integer() {
    skip_space();
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, uint64_t(text_[pos_] - '0'), &v))
        fail(start, "dimension too large");
      ++pos_;
    }
    if (pos_ == start) fail(start, "expected a non-negative integer");
    if (peek() == 'L') ++pos_;  // Python 2 long
    return v;
  }
  // `open`, items read by `item` separated by commas (a trailing one allowed), `close`.
  template <typename Item>
  void items(char open, char close, Item item) {
    expect(open);
    while (true) {
      skip_space();
      if (peek() == close) break;
      item();
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != close) fail(pos_, fmt::format("expected ',' or '{}'", close));
    }
    ++pos_;
  }
  std::vector<uint64_t> tuple() {
    std::vector<uint64_t> dims;
    items('(', ')', [&] {
      dims.push_back(integer());
      if (dims.size() > 32) fail(pos_, "more than 32 dimensions");
    });
    return dims;
  }
  Value value() {
    skip_space();
    const char c = peek();
    if (c == '\'' || c == '"') return string();
    if (c == '(') return tuple();
    for (auto [word, v] : {std::pair{std::string_view("True"), true}, {"False", false}})
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return v;
      }
    fail(pos_, "expected a string, True, False or a tuple");
  }

  std::string_view text_;
  const std::string& source_;
  size_t pos_ = 0;
};

uint32_t read_le(const std::vector<uint8_t>& b, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint32_t(b[at + i]) << (8 * i);
  return v;
}

}  // namespace

uint64_t NpyArray::elements() const { return checked_product(shape, 1); }

std::vector<float> NpyArray::to_float() const {
  const DtypeInfo* d = find_dtype(dtype);
  if (!d) throw InputError(fmt::format("unsupported dtype '{}'; supported: {}", dtype, supported_dtypes()));
  const size_t n = data.size() / d->size;
  std::vector<float> out(n);
  const uint8_t* p = data.data();
  for (size_t i = 0; i < n; ++i, p += d->size) {
    uint64_t bits = 0;
    for (size_t k = 0; k < d->size; ++k) bits |= uint64_t(p[k]) << (8 * k);
    switch (d->descr[1]) {
      case 'f':
        if (d->size == 4) {
          const uint32_t b32 = uint32_t(bits);
          float f;
          std::memcpy(&f, &b32, 4);
          out[i] = f;
        } else {
          double f;
          std::memcpy(&f, &bits, 8);
          out[i] = float(f);
        }
        break;
      case 'i':
        out[i] = d->size == 1   ? float(int8_t(bits))
                 : d->size == 4 ? float(int32_t(uint32_t(bits)))
                                : float(int64_t(bits));
        break;
      default: out[i] = float(uint8_t(bits)); break;
    }
  }
  return out;
}

NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& source) {
  if (bytes.size() < 10 || std::string_view(reinterpret_cast<const char*>(bytes.data()), 6) != kMagic)
    throw InputError(fmt::format("{}: not a .npy file (it does not start with \\x93NUMPY)", source));
  const int major = bytes[6], minor = bytes[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    throw InputError(fmt::format("{}: unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", source, major, minor));
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) throw InputError(fmt::format("{}: truncated .npy header", source));
  const uint64_t header_len = read_le(bytes, 8, len_bytes);
  const uint64_t data_start = 8 + len_bytes + header_len;
  if (bytes.size() < data_start)
    throw InputError(fmt::format("{}: truncated: the header is {} bytes long but the file has only {} bytes after the length",
                                 source, header_len, bytes.size() - 8 - len_bytes));
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8 + len_bytes, header_len);
  auto dict = HeaderParser(header, source).dict();
  for (const auto& [key, v] : dict)
    if (key != "descr" && key != "fortran_order" && key != "shape")
      throw InputError(fmt::format("{}: .npy header has an unexpected key '{}' (expected descr, fortran_order, shape)", source, key));
  for (const char* key : {"descr", "fortran_order", "shape"})
    if (!dict.count(key)) throw InputError(fmt::format("{}: .npy header lacks '{}'", source, key));
  const auto* descr = std::get_if<std::string>(&dict["descr"]);
  const auto* fortran = std::get_if<bool>(&dict["fortran_order"]);
  const auto* shape = std::get_if<std::vector<uint64_t>>(&dict["shape"]);
  if (!descr) throw InputError(fmt::format("{}: .npy header: 'descr' is not a string", source));
  if (!fortran) throw InputError(fmt::format("{}: .npy header: 'fortran_order' is not True or False", source));
  if (!shape) throw InputError(fmt::format("{}: .npy header: 'shape' is not a tuple", source));
  const DtypeInfo* d = find_dtype(*descr);
  if (!d) throw InputError(fmt::format("{}: unsupported dtype '{}'; supported: {}", source, *descr, supported_dtypes()));
  if (*fortran)
    throw InputError(fmt::format("{}: fortran_order is True; only C order is supported (save np.ascontiguousarray(a))", source));
  const uint64_t need = checked_product(*shape, d->size);
  const uint64_t have = bytes.size() - data_start;
  if (need != have)
    throw InputError(fmt::format("{}: {} bytes of data, but shape {} of {} needs {}{}", source, have, shape_text(*shape),
                                 d->descr, need == UINT64_MAX ? std::string("more than 2^64") : std::to_string(need),
                                 have < need ? " (truncated file)" : ""));
  NpyArray a;
  a.dtype = std::string(d->descr);
  a.shape = *shape;
  a.data.assign(bytes.begin() + std::ptrdiff_t(data_start), bytes.end());
  return a;
}

NpyArray read_npy(const std::filesystem::path& path) {
  return parse_npy(io::read_binary_file(path, io::kMaxDataFileBytes, "a .npy array"), path.string());
}

void write_npy(const std::filesystem::path& path, const NpyArray& array) {
  const DtypeInfo* d = find_dtype(array.dtype);
  if (!d) throw InputError(fmt::format("{}: cannot write dtype '{}'; supported: {}", path.string(), array.dtype, supported_dtypes()));
  if (checked_product(array.shape, d->size) != array.data.size())
    throw InputError(fmt::format("{}: {} bytes of data do not match shape {} of {}", path.string(), array.data.size(),
                                 shape_text(array.shape), d->descr));
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", d->descr, shape_text(array.shape));
  const bool v2 = header.size() + 11 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic);
  out += char(v2 ? 2 : 1);
  out += char(0);
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += char((header.size() >> (8 * i)) & 0xff);
  out += header;
  io::OutputFile f(path);
  f.stream().write(out.data(), std::streamsize(out.size()));
  f.stream().write(reinterpret_cast<const char*>(array.data.data()), std::streamsize(array.data.size()));
  f.commit();
}

NpyArray npy_float32(std::vector<uint64_t> shape, const std::vector<float>& values) {
  NpyArray a{"<f4", std::move(shape), {}};
  a.data.reserve(values.size() * 4);
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int k = 0; k < 4; ++k) a.data.push_back(uint8_t(bits >> (8 * k)));
  }
  return a;
}

NpyArray npy_int8(std::vector<uint64_t> shape, const std::vector<int8_t>& values) {
  NpyArray a{"|i1", std::move(shape), {}};
  a.data.assign(values.begin(), values.end());
  return a;
}

}  // namespace tpusim::compiler

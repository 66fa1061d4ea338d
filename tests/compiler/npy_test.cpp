// .npy reading and writing (compiler/npy.h): files as NumPy writes them, byte for byte, and every
// way a file can be wrong.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "compiler/npy.h"
#include "isa/error.h"
#include "tests/test_support.h"

using namespace tpusim;
using namespace tpusim::compiler;
using Catch::Matchers::Contains;

namespace {

// A .npy file as numpy.lib.format writes it: magic, version, little-endian header length (2
// bytes for 1.0, 4 for 2.0 and 3.0), the dict padded with spaces and a final '\n' so that the
// data starts at a multiple of 64.
std::vector<uint8_t> npy_bytes(const std::string& dict, int major, const std::vector<uint8_t>& data) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), 0};
  for (size_t i = 0; i < prefix - 8; ++i) out.push_back(uint8_t(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());  // the test host is little-endian
  return out;
}

const std::string kDict23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

}  // namespace

TEST_CASE("npy: a float32 file as numpy writes it reads back exactly") {
  const std::vector<uint8_t> bytes = npy_bytes(kDict23, 1, f32_bytes({1, 2, 3, -4.5f, 0.25f, 1e-3f}));
  REQUIRE(bytes.size() == 128 + 24);  // header padded to 128 bytes
  const NpyArray a = parse_npy(bytes, "a.npy");
  CHECK(a.dtype == "<f4");
  CHECK(a.shape == std::vector<uint64_t>{2, 3});
  CHECK(a.elements() == 6);
  CHECK(a.to_float() == std::vector<float>{1, 2, 3, -4.5f, 0.25f, 1e-3f});
}

TEST_CASE("npy: write_npy writes the bytes numpy writes") {
  test::ScratchDir dir;
  write_npy(dir / "a.npy", npy_float32({2, 3}, {1, 2, 3, -4.5f, 0.25f, 1e-3f}));
  CHECK(test::hex(test::read_bytes(dir / "a.npy")) ==
        test::hex(npy_bytes(kDict23, 1, f32_bytes({1, 2, 3, -4.5f, 0.25f, 1e-3f}))));
  write_npy(dir / "b.npy", npy_int8({3}, {-128, 0, 127}));
  CHECK(test::hex(test::read_bytes(dir / "b.npy")) ==
        test::hex(npy_bytes("{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", 1, {0x80, 0x00, 0x7f})));
}

TEST_CASE("npy: round trips through a file, scalars and empty arrays included") {
  test::ScratchDir dir;
  for (const NpyArray& a : {npy_float32({4, 1, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), npy_float32({}, {3.5f}),
                            npy_int8({0}, {}), npy_int8({2, 2}, {1, -1, 2, -2})}) {
    write_npy(dir / "x.npy", a);
    const NpyArray back = read_npy(dir / "x.npy");
    CHECK(back.dtype == a.dtype);
    CHECK(back.shape == a.shape);
    CHECK(back.data == a.data);
  }
  CHECK(read_npy(dir / "x.npy").to_float() == std::vector<float>{1, -1, 2, -2});
}

TEST_CASE("npy: every supported dtype converts to float") {
  auto one = [](const std::string& descr, std::vector<uint8_t> data) {
    return parse_npy(npy_bytes("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }", 1, data), "t.npy")
        .to_float();
  };
  std::vector<uint8_t> f8(16);
  const double d[2] = {0.5, -1e10};
  std::memcpy(f8.data(), d, 16);
  CHECK(one("<f8", f8) == std::vector<float>{0.5f, -1e10f});
  CHECK(one("|u1", {200, 7}) == std::vector<float>{200, 7});
  CHECK(one("|i1", {0xff, 0x80}) == std::vector<float>{-1, -128});
  CHECK(one("<i4", {0xfb, 0xff, 0xff, 0xff, 0x00, 0x00, 0x01, 0x00}) == std::vector<float>{-5, 65536});
  CHECK(one("=f4", f32_bytes({1.5f, 2})) == std::vector<float>{1.5f, 2});
  // int64: NumPy's default integer (np.array([3, 7]), sklearn's targets, torch.argmax's result)
  CHECK(one("<i8", {0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00}) ==
        std::vector<float>{-3, 4294967296.0f});
}

TEST_CASE("npy: header keys in any order, versions 2.0 and 3.0, shapes () and (3,)") {
  const NpyArray a = parse_npy(npy_bytes("{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}", 2, f32_bytes({1, 2, 3})), "v2.npy");
  CHECK(a.shape == std::vector<uint64_t>{3});
  CHECK(a.to_float() == std::vector<float>{1, 2, 3});
  const NpyArray s = parse_npy(npy_bytes("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": ()}", 3, f32_bytes({7})), "v3.npy");
  CHECK(s.shape.empty());
  CHECK(s.elements() == 1);
  CHECK(s.to_float() == std::vector<float>{7});
}

TEST_CASE("npy: malformed files are rejected with the reason") {
  std::vector<uint8_t> good = npy_bytes(kDict23, 1, f32_bytes({1, 2, 3, 4, 5, 6}));
  auto bad = good;
  bad[1] = 'X';
  CHECK_THROWS_WITH(parse_npy(bad, "a.npy"), "a.npy: not a .npy file (it does not start with \\x93NUMPY)");
  bad = good;
  bad[6] = 4;
  CHECK_THROWS_WITH(parse_npy(bad, "a.npy"), "a.npy: unsupported .npy format version 4.0 (supported: 1.0, 2.0, 3.0)");
  CHECK_THROWS_WITH(parse_npy({good.begin(), good.begin() + 60}, "a.npy"),
                    "a.npy: truncated: the header is 118 bytes long but the file has only 50 bytes after the length");
  CHECK_THROWS_WITH(parse_npy({good.begin(), good.end() - 1}, "a.npy"),
                    "a.npy: 23 bytes of data, but shape (2, 3) of <f4 needs 24 (truncated file)");
  bad = good;
  bad.push_back(0);
  CHECK_THROWS_WITH(parse_npy(bad, "a.npy"), "a.npy: 25 bytes of data, but shape (2, 3) of <f4 needs 24");
  CHECK_THROWS_WITH(parse_npy({good.begin(), good.begin() + 5}, "a.npy"), Contains("not a .npy file"));
}

TEST_CASE("npy: unsupported dtypes, Fortran order and bad headers") {
  auto with = [](const std::string& dict) { return parse_npy(npy_bytes(dict, 1, std::vector<uint8_t>(8)), "w.npy"); };
  CHECK_THROWS_WITH(with("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }"),
                    "w.npy: unsupported dtype '>f4'; supported: '<f4' (float32), '<f8' (float64), '|i1' (int8), "
                    "'|u1' (uint8), '<i4' (int32), '<i8' (int64)");
  CHECK_THROWS_WITH(with("{'descr': '<i2', 'fortran_order': False, 'shape': (4,), }"), Contains("unsupported dtype '<i2'"));
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }"),
                    "w.npy: fortran_order is True; only C order is supported (save np.ascontiguousarray(a))");
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'shape': (2,), }"), "w.npy: .npy header lacks 'fortran_order'");
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}"),
                    Contains("w.npy: .npy header, character"));
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': True}"),
                    "w.npy: .npy header has an unexpected key 'x' (expected descr, fortran_order, shape)");
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}"), Contains("expected a string, True, False or a tuple"));
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1)}"), Contains("expected a non-negative integer"));
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': False, 'shape': 2}"), Contains("expected a string, True, False or a tuple"));
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)"), Contains("expected ',' or '}'"));
  // The dict and the shape tuple share one comma-separated list reader: its errors name each's
  // own closing bracket and the character (1-based) where it went wrong.
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}"),
                    Contains(".npy header, character 54: expected ',' or ')'"));
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'descr': '<f4', 'shape': (2,)}"),
                    Contains(".npy header, character 18: key 'descr' given twice"));
  std::string dims33;
  for (int i = 0; i < 33; ++i) dims33 += "1, ";
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims33 + ")}"),
                    Contains("more than 32 dimensions"));
  CHECK_THROWS_WITH(with("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999)}"),
                    Contains("needs more than 2^64"));
}

TEST_CASE("npy: files that cannot be read") {
  test::ScratchDir dir;
  CHECK_THROWS_WITH(read_npy(dir / "missing.npy"),
                    (dir / "missing.npy").string() + ": cannot open: No such file or directory");
  CHECK_THROWS_WITH(read_npy(dir.path()), dir.path().string() + ": is a directory");
  test::write_text(dir / "text.npy", "hello");
  CHECK_THROWS_WITH(read_npy(dir / "text.npy"), Contains("not a .npy file"));
  CHECK_THROWS_AS(write_npy(dir / "bad.npy", NpyArray{"<f4", {3}, {1, 2}}), InputError);
}

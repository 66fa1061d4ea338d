// NumPy .npy files (format versions 1.0, 2.0 and 3.0; C order): weights, biases and inputs named
// in model descriptions, and tensors the tools write. Owner: front end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tpusim::compiler {

struct NpyArray {
  std::string dtype;             // NumPy descr: "<f4", "<f8", "|i1", "|u1", "<i4", "<i8"
  std::vector<uint64_t> shape;   // [] for a scalar
  std::vector<uint8_t> data;     // element bytes, little-endian, C order
  uint64_t elements() const;
  std::vector<float> to_float() const;  // any supported dtype, converted
};

// Throws InputError naming the file and what is wrong (bad magic, unsupported dtype or
// version, Fortran order, data size not matching the shape, ...).
NpyArray read_npy(const std::filesystem::path& path);
NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& source);
void write_npy(const std::filesystem::path& path, const NpyArray& array);
NpyArray npy_float32(std::vector<uint64_t> shape, const std::vector<float>& values);
NpyArray npy_int8(std::vector<uint64_t> shape, const std::vector<int8_t>& values);

}  // namespace tpusim::compiler

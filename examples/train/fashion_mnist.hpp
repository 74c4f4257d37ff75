#pragma once
// Fashion-MNIST from its gzipped IDX files (Debian's dataset-fashion-mnist
// installs them in /usr/share/datasets/fashion-mnist/): 60,000 training and
// 10,000 test images of 28x28 bytes, labels 0-9. Images become floats in
// [0, 1], normalised by the training set's mean and deviation.
#include <zlib.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace train {

struct dataset {
  int rows = 0, cols = 0;
  std::vector<float> images;          // size() * rows * cols
  std::vector<std::uint8_t> labels;   // size()
  std::size_t size() const { return labels.size(); }
  std::size_t pixels() const { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols); }
};

namespace detail {

class gz_file {
 public:
  explicit gz_file(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
    if (!f_)
      throw std::runtime_error(path + ": cannot open (install Debian's dataset-fashion-mnist, or pass --data DIR)");
  }
  ~gz_file() { gzclose(f_); }
  gz_file(const gz_file&) = delete;
  gz_file& operator=(const gz_file&) = delete;
  void read(void* into, std::size_t bytes, const char* what) {
    auto* p = static_cast<unsigned char*>(into);
    while (bytes) {
      const unsigned chunk = bytes > (1u << 30) ? (1u << 30) : static_cast<unsigned>(bytes);
      const int got = gzread(f_, p, chunk);
      if (got <= 0) {
        int err = 0;
        const char* msg = gzerror(f_, &err);
        throw std::runtime_error(path_ + ": truncated or corrupt while reading " + what +
                                 (err ? std::string(" (") + msg + ")" : std::string()));
      }
      p += got;
      bytes -= static_cast<std::size_t>(got);
    }
  }
  std::uint32_t be32(const char* what) {
    unsigned char b[4];
    read(b, 4, what);
    return std::uint32_t(b[0]) << 24 | std::uint32_t(b[1]) << 16 | std::uint32_t(b[2]) << 8 | b[3];
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile f_;
};

}  // namespace detail

/// Reads `<dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz`.
/// Throws std::runtime_error naming the file when one is missing or corrupt.
inline dataset load_fashion_mnist(const std::string& dir, bool training) {
  const std::string prefix = dir + "/" + (training ? "train" : "t10k");
  dataset d;
  std::vector<std::uint8_t> raw;
  {
    detail::gz_file f(prefix + "-images-idx3-ubyte.gz");
    if (f.be32("the magic number") != 0x00000803)
      throw std::runtime_error(f.path() + ": not an IDX image file (bad magic number)");
    const std::uint32_t n = f.be32("the image count");
    d.rows = static_cast<int>(f.be32("the row count"));
    d.cols = static_cast<int>(f.be32("the column count"));
    if (n == 0 || n > 1000000 || d.rows != 28 || d.cols != 28)
      throw std::runtime_error(f.path() + ": unexpected shape " + std::to_string(n) + "x" + std::to_string(d.rows) +
                               "x" + std::to_string(d.cols) + " (want Nx28x28)");
    raw.resize(static_cast<std::size_t>(n) * d.pixels());
    f.read(raw.data(), raw.size(), "the pixels");
  }
  {
    detail::gz_file f(prefix + "-labels-idx1-ubyte.gz");
    if (f.be32("the magic number") != 0x00000801)
      throw std::runtime_error(f.path() + ": not an IDX label file (bad magic number)");
    const std::uint32_t n = f.be32("the label count");
    if (n != raw.size() / d.pixels())
      throw std::runtime_error(f.path() + ": " + std::to_string(n) + " labels for " +
                               std::to_string(raw.size() / d.pixels()) + " images");
    d.labels.resize(n);
    f.read(d.labels.data(), n, "the labels");
    for (std::uint8_t l : d.labels)
      if (l > 9) throw std::runtime_error(f.path() + ": label " + std::to_string(l) + " out of range 0-9");
  }
  // Fashion-MNIST's training-set pixel mean and deviation (on [0, 1]).
  constexpr float mean = 0.2860f, deviation = 0.3530f;
  d.images.resize(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) d.images[i] = (static_cast<float>(raw[i]) / 255.0f - mean) / deviation;
  return d;
}

}  // namespace train

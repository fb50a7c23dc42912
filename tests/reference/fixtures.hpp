// tests/reference/fixtures.hpp - PyTorch fixtures (written by gen_reference_fixtures.py) and the
// helpers that turn them into tensors of any format and compare results with a dtype-aware tolerance.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "memfmt/dtype.hpp"
#include "memfmt/tensor/host_tensor.hpp"
#include "../common/coords.hpp"

using memfmt_test::for_each_coord;

#ifndef MEMFMT_REFERENCE_FIXTURE_DIR
#error "MEMFMT_REFERENCE_FIXTURE_DIR must name tests/reference/fixtures"
#endif

namespace memfmt::testing {

struct fixture_tensor {
  std::vector<std::int64_t> sizes;  // logical N, C, spatial (or a 1-D channel vector)
  std::vector<double> data;         // contiguous (NCHW / NCDHW) order
};

struct fixture_case {
  std::string name, op;
  std::map<std::string, std::int64_t> ints;
  std::map<std::string, double> reals;
  std::map<std::string, fixture_tensor> tensors;

  bool has(const std::string& t) const { return tensors.count(t) != 0; }
  const fixture_tensor& tensor(const std::string& t) const {
    auto it = tensors.find(t);
    if (it == tensors.end()) throw std::runtime_error("fixture " + name + ": no tensor " + t);
    return it->second;
  }
  std::int64_t integer(const std::string& k) const {
    auto it = ints.find(k);
    if (it == ints.end()) throw std::runtime_error("fixture " + name + ": no int " + k);
    return it->second;
  }
  double real(const std::string& k) const {
    auto it = reals.find(k);
    if (it == reals.end()) throw std::runtime_error("fixture " + name + ": no real " + k);
    return it->second;
  }
};

class fixture_reader {
 public:
  explicit fixture_reader(std::vector<char> bytes) : b_(std::move(bytes)) {}
  template <class V>
  V pod() {
    if (pos_ + sizeof(V) > b_.size()) throw std::runtime_error("fixture file truncated");
    V v;
    std::memcpy(&v, b_.data() + pos_, sizeof(V));  // the files are little-endian, as is every target we test on
    pos_ += sizeof(V);
    return v;
  }
  std::string str() {
    const auto n = pod<std::uint32_t>();
    if (pos_ + n > b_.size()) throw std::runtime_error("fixture file truncated");
    std::string s(b_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  bool at_end() const { return pos_ == b_.size(); }

 private:
  std::vector<char> b_;
  std::size_t pos_ = 0;
};

inline std::vector<fixture_case> load_fixtures(const std::string& file) {
  const std::string path = std::string(MEMFMT_REFERENCE_FIXTURE_DIR) + "/" + file;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  fixture_reader r(std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  char magic[4];
  for (char& c : magic) c = r.pod<char>();
  if (std::string(magic, 4) != "MFXT" || r.pod<std::uint32_t>() != 1) throw std::runtime_error(path + ": not MFXT v1");
  std::vector<fixture_case> cases(r.pod<std::uint32_t>());
  for (auto& c : cases) {
    c.name = r.str();
    c.op = r.str();
    for (auto n = r.pod<std::uint32_t>(); n > 0; --n) {
      auto k = r.str();
      c.ints[k] = r.pod<std::int64_t>();
    }
    for (auto n = r.pod<std::uint32_t>(); n > 0; --n) {
      auto k = r.str();
      c.reals[k] = r.pod<double>();
    }
    for (auto n = r.pod<std::uint32_t>(); n > 0; --n) {
      auto k = r.str();
      fixture_tensor t;
      t.sizes.resize(r.pod<std::uint32_t>());
      std::int64_t numel = 1;
      for (auto& s : t.sizes) numel *= (s = r.pod<std::int64_t>());
      t.data.resize(static_cast<std::size_t>(numel));
      for (auto& v : t.data) v = r.pod<double>();
      c.tensors[k] = std::move(t);
    }
  }
  if (!r.at_end()) throw std::runtime_error(path + ": trailing bytes");
  return cases;
}

// ---- element types ----

template <class T>
double to_f64(T v) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) return static_cast<double>(v);
  else return static_cast<double>(static_cast<float>(v));
}
// Test inputs lie on a coarse grid, exact in every element type, so this conversion is exact.
template <class T>
T from_f64_exact(double v) {
  T t;
  if constexpr (std::is_same_v<T, double>) t = v;
  else if constexpr (std::is_same_v<T, float>) t = static_cast<float>(v);
  else t = T(static_cast<float>(v));
  if (to_f64(t) != v) throw std::runtime_error("fixture input " + std::to_string(v) + " is not exact in T");
  return t;
}

template <class T>
struct float_traits;
template <>
struct float_traits<double> {
  static constexpr int digits = 53, min_exp = -1022;
  static constexpr const char* name = "double";
};
template <>
struct float_traits<float> {
  static constexpr int digits = 24, min_exp = -126;
  static constexpr const char* name = "float";
};
template <>
struct float_traits<half> {
  static constexpr int digits = 11, min_exp = -14;
  static constexpr const char* name = "half";
};
template <>
struct float_traits<bfloat16> {
  static constexpr int digits = 8, min_exp = -126;
  static constexpr const char* name = "bfloat16";
};

// One unit in the last place of T at magnitude |v| (the subnormal spacing below T's normal range).
template <class T>
double ulp(double v) {
  int e = std::isfinite(v) && v != 0.0 ? std::ilogb(v) : float_traits<T>::min_exp;
  if (e < float_traits<T>::min_exp) e = float_traits<T>::min_exp;
  return std::ldexp(1.0, e - (float_traits<T>::digits - 1));
}
template <class T>
double epsilon() {
  return std::ldexp(1.0, 1 - float_traits<T>::digits);
}

// ---- tensors from fixtures ----

template <int Rank>
std::array<std::int64_t, Rank> to_extents(const fixture_tensor& t) {
  if (static_cast<int>(t.sizes.size()) != Rank) throw std::runtime_error("fixture tensor has the wrong rank");
  std::array<std::int64_t, Rank> e{};
  for (int d = 0; d < Rank; ++d) e[d] = t.sizes[d];
  return e;
}

// The fixture's values in format F: element (n, c, ...) is stored wherever F's layout puts it.
template <class T, class F>
host_tensor<T, F> to_tensor(const fixture_tensor& t) {
  host_tensor<T, F> out(to_extents<F::rank>(t));
  for_each_coord(out.extents(), [&](const auto& c, std::int64_t i) {
    out.data()[out.mapping()(c)] = from_f64_exact<T>(t.data[static_cast<std::size_t>(i)]);
  });
  return out;
}

template <class T>
std::vector<T> to_vector(const fixture_tensor& t) {
  std::vector<T> v;
  for (double d : t.data) v.push_back(from_f64_exact<T>(d));
  return v;
}

// A tensor of F filled with NaN, so an element the code under test never writes is caught.
template <class T, class F>
host_tensor<T, F> nan_tensor(const typename host_tensor<T, F>::extents_type& e) {
  host_tensor<T, F> out(e);
  for (std::int64_t i = 0; i < out.numel(); ++i) out.data()[i] = T(std::numeric_limits<float>::quiet_NaN());
  return out;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double d : v) m = std::max(m, std::fabs(d));
  return m;
}

// Compares got[i] with want[i] (contiguous order); tol(i, want) is the allowed error.
template <class Got, class Tol>
void expect_close(const std::string& what, std::int64_t numel, Got&& got, const std::vector<double>& want, Tol&& tol) {
  int bad = 0;
  double worst = 0;
  for (std::int64_t i = 0; i < numel; ++i) {
    const double g = got(i), w = want[static_cast<std::size_t>(i)], t = tol(i, w);
    const double err = std::fabs(g - w);
    if (!(err <= t)) {  // also catches NaN (an unwritten element)
      if (bad < 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << g << ", want " << w << ", error " << err << " > tolerance "
                      << t;
      ++bad;
    }
    if (t > 0) worst = std::max(worst, err / t);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << numel << " elements out of tolerance";
}

// A tensor result (any format) against a fixture tensor, within `ulps` ulps of T plus `abs_tol`.
template <class T, class F>
void expect_tensor_close(const std::string& what, const host_tensor<T, F>& got, const fixture_tensor& want, double ulps,
                         double abs_tol) {
  ASSERT_EQ(got.extents(), to_extents<F::rank>(want)) << what;
  std::vector<std::int64_t> offset(static_cast<std::size_t>(got.numel()));
  for_each_coord(got.extents(),
                 [&](const auto& c, std::int64_t i) { offset[static_cast<std::size_t>(i)] = got.mapping()(c); });
  expect_close(
      what + " (" + float_traits<T>::name + ", " + F::name + ")", got.numel(),
      [&](std::int64_t i) { return to_f64(got.data()[offset[static_cast<std::size_t>(i)]]); }, want.data,
      [&](std::int64_t, double w) { return ulps * ulp<T>(w) + abs_tol; });
}

}  // namespace memfmt::testing

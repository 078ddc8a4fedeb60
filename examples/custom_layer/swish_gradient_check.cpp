// The swish layer against its definition, in float64, through the registry as a config
// would build it: hand values, a central-difference check of backward, and config errors.
// Prints "OK" and the largest difference, or what failed; exit 1 on any failure.
#include <mpiddp/core/error.hpp>
#include <mpiddp/nn/layer_registry.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "expect.hpp"
#include "swish.hpp"

namespace {

using mpiddp::ConstMatrixView;
using mpiddp::Index;
using mpiddp::Matrix;
using mpiddp::MatrixView;

using swish_example::expect;
using swish_example::failures;

std::unique_ptr<mpiddp::nn::Layer<double>> build(const std::string& layers, const mpiddp::nn::Shape& input) {
  const auto specs = mpiddp::nn::parse_layer_list(mpiddp::io::Json::parse(layers));
  return mpiddp::nn::build_layer<double>(specs.at(0), input);
}

// Deterministic values in [lo, hi).
Matrix<double> values(Index rows, Index cols, double lo, double hi, unsigned seed) {
  Matrix<double> m(rows, cols);
  unsigned long long s = 0x9E3779B97F4A7C15ULL * (seed + 1);
  for (Index i = 0; i < m.size(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    m.data()[i] = lo + (hi - lo) * static_cast<double>(s >> 11) * 0x1.0p-53;
  }
  return m;
}

// Note [tolerance]: central differences with h = 1e-6 err by O(h^2 f''') ~ 1e-12 (truncation)
// plus ~ eps |L| / h ~ 1e-9 (rounding, |L| ~ 10 here); 1e-7 leaves two orders of headroom and
// still fails a derivative that is wrong in any one term (the self-check below shows it).
constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-7;

// max over i of |analytic_i - numeric_i| / max(1, |numeric_i|), numeric from central
// differences of L(x) = sum(w .* forward(x)), analytic from dx = gradient(x, dy = w).
double gradient_error(mpiddp::nn::Layer<double>& layer, Matrix<double> x, const Matrix<double>& w,
                      const std::function<Matrix<double>(const Matrix<double>&)>& gradient) {
  const mpiddp::nn::PassContext context;
  Matrix<double> y(x.rows(), x.cols());
  auto loss = [&] {
    layer.forward(context, ConstMatrixView<double>(x.data(), x.rows(), x.cols()),
                  MatrixView<double>(y.data(), y.rows(), y.cols()));
    return (w.array() * y.array()).sum();
  };
  const Matrix<double> analytic = gradient(x);
  double worst = 0.0;
  for (Index i = 0; i < x.size(); ++i) {
    const double saved = x.data()[i];
    x.data()[i] = saved + kStep;
    const double up = loss();
    x.data()[i] = saved - kStep;
    const double down = loss();
    x.data()[i] = saved;
    const double numeric = (up - down) / (2 * kStep);
    worst = std::max(worst, std::fabs(analytic.data()[i] - numeric) / std::max(1.0, std::fabs(numeric)));
  }
  return worst;
}

}  // namespace

int main() {
  mpiddp::nn::register_layer_type(swish_example::swish_layer_type());
  const mpiddp::nn::PassContext context;

  // Hand values, beta = 1: swish(1) = 1 / (1 + e^-1) = 0.7310585786300049,
  // swish(-2) = -2 / (1 + e^2) = -0.2384058440442351, swish(0) = 0.
  auto unit = build(R"([{"type": "swish"}])", {3});
  expect(unit->outputs() == 3 && unit->parameters().empty(), "swish keeps the shape, has no parameters");
  Matrix<double> x(3, 1), y(3, 1);
  x << 1.0, -2.0, 0.0;
  unit->forward(context, ConstMatrixView<double>(x.data(), 3, 1), MatrixView<double>(y.data(), 3, 1));
  expect(std::fabs(y(0) - 0.7310585786300049) < 1e-15, "swish(1)");
  expect(std::fabs(y(1) + 0.2384058440442351) < 1e-15, "swish(-2)");
  expect(y(2) == 0.0, "swish(0)");

  // backward against finite differences, beta = 1.7, on (2, 3, 4)-shaped samples, batch 5.
  auto layer = build(R"([{"type": "swish", "beta": 1.7}])", {2, 3, 4});
  const Matrix<double> input = values(24, 5, -4.0, 4.0, 1);
  const Matrix<double> w = values(24, 5, -1.0, 1.0, 2);
  auto backward = [&](const Matrix<double>& at) {
    Matrix<double> out(at.rows(), at.cols()), dx(at.rows(), at.cols());
    const ConstMatrixView<double> xv(at.data(), at.rows(), at.cols());
    layer->forward(context, xv, MatrixView<double>(out.data(), out.rows(), out.cols()));
    MatrixView<double> dxv(dx.data(), dx.rows(), dx.cols());
    layer->backward(context, xv, ConstMatrixView<double>(out.data(), out.rows(), out.cols()),
                    ConstMatrixView<double>(w.data(), w.rows(), w.cols()), &dxv);
    return dx;
  };
  const double error = gradient_error(*layer, input, w, backward);
  expect(error <= kTolerance, "backward differs from finite differences by " + std::to_string(error));

  // The check can fail: the same comparison rejects a derivative missing its second term
  // (dx = dy * sigmoid(beta x), the mistake of treating x as a constant).
  auto wrong = [&](const Matrix<double>& at) {
    return Matrix<double>(w.array() / (1.0 + (-1.7 * at.array()).exp()));
  };
  expect(gradient_error(*layer, input, w, wrong) > 1e3 * kTolerance, "the check catches a wrong derivative");

  // Config errors name the key path, as the built-in layers' do.
  auto config_error_key = [](const std::string& layers) -> std::string {
    try {
      build(layers, {3});
    } catch (const mpiddp::ConfigError& e) {
      return e.key_path();
    }
    return "none";
  };
  expect(config_error_key(R"([{"type": "swish", "beta": 0}])") == "model.layers[0].beta", "beta = 0 is refused");
  expect(config_error_key(R"([{"type": "swish", "betta": 2}])") == "model.layers[0].betta", "an unknown key is refused");

  if (failures) return 1;
  std::printf("OK: swish hand values, backward vs finite differences maxdiff %.2e (tolerance %.0e), config errors\n",
              error, kTolerance);
  return 0;
}
